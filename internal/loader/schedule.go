package loader

// Scheduled release: a file's payouts may carry a time before which they
// do not leave. The batch's release time comes from the command line
// (--release-at), the console's upload form, or its control file
// (release=, control.go); a row's own pay date from the informational
// column named by payfile.Options.PayDateColumn (--pay-date-column), which
// wins over the batch's for its row. Each is read strictly
// (schedule.Rules.Parse: a date YYYY-MM-DD in the release zone, or an
// RFC 3339 time), moved to the next business day by the calendar, and
// checked against the window (not before today, not beyond the horizon):
// a date refused refuses the whole file, --partial or not, with its file,
// line and column, before anything is registered. The payouts registered
// with a release time are moved to scheduled (ledger.Schedule.PutLocked)
// before the batch is handed to the workers; the workers' releaser sends
// them at their time (package schedule).

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/schedule"
)

// ColumnRelease is the payfile.Error.Column of a refused batch release time.
const ColumnRelease = "release"

// Release is when the payouts of a file may leave.
type Release struct {
	// At is the batch's release time as written (--release-at, the
	// console's form); a control file's release= is used when At is "".
	At string
	// Rules read and check every release time and pay date.
	Rules schedule.Rules
	// Now is the clock the window is checked by (nil: time.Now).
	Now func() time.Time
	// at is the batch's release time, resolved (zero: none).
	at time.Time
}

func (r Release) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// on reports whether the file may carry release times at all.
func (o Options) releasing() bool {
	return !o.Release.at.IsZero() || o.File.PayDateColumn != ""
}

// resolveRelease sets opts.Release.at from --release-at or the control
// file of the payout file at path (named name), or returns the refusal of
// the file.
func resolveRelease(path, name string, opts *Options) []payfile.Error {
	r := &opts.Release
	at, file, line := r.At, name, 0
	if at == "" {
		ctl, found, problems, err := ReadControl(ControlPath(path), opts.File.Scale)
		if !found || err != nil || len(problems) > 0 || ctl.Release == "" {
			return nil
		}
		at, file, line = ctl.Release, name+ControlExt, ctl.ReleaseLine
	}
	if at == "" {
		return nil
	}
	t, err := r.Rules.Resolve(at, r.now())
	if err != nil {
		return []payfile.Error{{File: file, Line: line, Column: ColumnRelease, Kind: payfile.KindField, Message: dateMessage(err)}}
	}
	r.at = t
	return nil
}

// rowRelease is when row may leave: its own pay date, else the batch's
// (zero: at once). check also checks the window; the error is the row's.
func (o Options) rowRelease(row payfile.Row, check bool) (time.Time, error) {
	if row.PayDate == "" {
		return o.Release.at, nil
	}
	if check {
		return o.Release.Rules.Resolve(row.PayDate, o.Release.now())
	}
	return o.Release.Rules.Parse(row.PayDate)
}

// dateError is the error of a row whose pay date is refused.
func dateError(name string, row payfile.Row, column string, err error) payfile.Error {
	return payfile.Error{File: name, Line: row.Line, Column: column, Kind: payfile.KindField, Message: dateMessage(err)}
}

// dateMessage is what a person reads of a refused date.
func dateMessage(err error) string {
	msg := err.Error()
	if errors.Is(err, schedule.ErrDate) {
		msg = msg[:len(msg)-len(": "+schedule.ErrDate.Error())]
	}
	return fmt.Sprintf("%s; nothing of the file is loaded", msg)
}

// releaseReading is the release options a batch is read under
// (readingOptions): a resumed load must schedule its rows as the first run
// did. Empty when the file carries no release time.
func releaseReading(o Options) []readingOption {
	if !o.releasing() {
		return nil
	}
	at := ""
	if !o.Release.at.IsZero() {
		at = o.Release.at.UTC().Format(time.RFC3339)
	}
	c := o.Release.Rules.Calendar
	return []readingOption{
		{"release at", at},
		{"pay date column", o.File.PayDateColumn},
		{"release zone", o.Release.Rules.Zone.String()},
		{"business days", fmt.Sprintf("weekends off %v, %d holidays", c.Weekends, len(c.Holidays))},
	}
}
