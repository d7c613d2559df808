package loader

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/schedule"
)

// scheduleNow is the clock the release window is checked by in these tests.
var scheduleNow = time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)

func releaseOptions(at, column string) Options {
	return Options{File: payfile.Options{PayDateColumn: column},
		Release: Release{At: at, Rules: schedule.Rules{Calendar: schedule.Calendar{Weekends: true}}, Now: func() time.Time { return scheduleNow }}}
}

const payDateCSV = "externalId,amount,telecomOperator,payDate\n" +
	"S-1,10,MTS,2026-12-24\n" +
	"S-2,20,MTS,\n" +
	"S-3,30,MTS,2026-12-26\n"

// TestLoadScheduled: rows with a release time are registered scheduled,
// with no task; a row's own pay date wins over the batch's, and a
// Saturday moves to Monday.
func TestLoadScheduled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "s.csv", payDateCSV), releaseOptions("2026-12-10", "payDate"))
	if err != nil || !res.Loaded || res.Registered != 3 || res.Scheduled != 3 || res.Enqueued != 0 {
		t.Fatalf("load: %+v %v", res, err)
	}
	for ext, want := range map[string]string{"S-1": "2026-12-24T00:00:00Z", "S-2": "2026-12-10T00:00:00Z", "S-3": "2026-12-28T00:00:00Z"} {
		p, err := f.led.Get(ctx, res.Batch, ext)
		if err != nil || p.State != lifecycle.Scheduled || p.ReleaseAt.Format(time.RFC3339) != want {
			t.Errorf("%s: %s at %s, %v; want scheduled at %s", ext, p.State, p.ReleaseAt.Format(time.RFC3339), err, want)
		}
	}
	if n := len(f.pendingTasks()); n != 0 {
		t.Fatalf("%d tasks for a scheduled batch", n)
	}
	due, err := f.led.Schedule().DueBatches(ctx, time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC), 10)
	if err != nil || len(due) != 1 || due[0] != res.Batch {
		t.Fatalf("due index on the 10th: %v, %v", due, err)
	}
}

// TestRefusedReleaseDates: a date in the past, beyond the horizon, or
// not a date refuses the whole file with file, line and column, and
// nothing of it is written (--partial too).
func TestRefusedReleaseDates(t *testing.T) {
	for _, c := range []struct {
		name, csv, at string
		partial       bool
		want          string
	}{
		{"past", "externalId,amount,telecomOperator,payDate\nP-1,10,MTS,2026-12-03\nP-2,10,MTS,2026-12-01\n", "", true,
			"p.csv:3: payDate: release 2026-12-01T00:00:00Z is in the past (today is 2026-12-02 in UTC); nothing of the file is loaded"},
		{"horizon", "externalId,amount,telecomOperator,payDate\nP-1,10,MTS,2027-06-01\n", "", false,
			"p.csv:2: payDate: release 2027-06-01T00:00:00Z is beyond the horizon of 90 days"},
		{"not a date", "externalId,amount,telecomOperator,payDate\nP-1,10,MTS,01.12.2026\n", "", false,
			"p.csv:2: payDate: \"01.12.2026\" is not a date (YYYY-MM-DD) or an RFC 3339 time"},
		{"batch past", "externalId,amount,telecomOperator,payDate\nP-1,10,MTS,\n", "2026-11-30", false,
			"p.csv:0: release: release 2026-11-30T00:00:00Z is in the past"},
		{"no pay date column", "externalId,amount,telecomOperator,notes\nP-1,10,MTS,x\n", "2026-12-10", true,
			`p.csv:1: header: no pay date column "payDate" (--pay-date-column) in the header: its informational columns are notes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			opts := releaseOptions(c.at, "payDate")
			opts.Partial = c.partial
			res, err := f.ld.LoadFile(context.Background(), writeFile(t, t.TempDir(), "p.csv", c.csv), opts)
			if err != nil || res.Loaded || len(res.Errors) != 1 {
				t.Fatalf("load: %+v %v", res, err)
			}
			if got := res.Errors[0].String(); !strings.HasPrefix(got, c.want) {
				t.Fatalf("error %q, want it to begin %q", got, c.want)
			}
			if n := f.keys(); n != 0 {
				keys, _ := f.rdb.Keys(context.Background(), "*").Result()
				t.Fatalf("a refused file left %d keys: %v", n, keys)
			}
		})
	}
}

// TestControlFileRelease: release= in NAME.ctl schedules the file; a bad
// one is refused naming the control file's line.
func TestControlFileRelease(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "c.csv", "externalId,amount,telecomOperator\nC-1,10,MTS\n")
	writeFile(t, dir, "c.csv.ctl", "# from the ERP\nrelease=2026-12-31T09:00:00+03:00\n")
	res, err := f.ld.LoadFile(context.Background(), path, releaseOptions("", ""))
	if err != nil || !res.Loaded || res.Scheduled != 1 || res.ReleaseAt.UTC().Format(time.RFC3339) != "2026-12-31T06:00:00Z" {
		t.Fatalf("load: %+v %v", res, err)
	}
	path = writeFile(t, dir, "d.csv", "externalId,amount,telecomOperator\nD-1,10,MTS\n")
	writeFile(t, dir, "d.csv.ctl", "rows=1\nrelease=2025-01-01\n")
	res, err = f.ld.LoadFile(context.Background(), path, releaseOptions("", ""))
	if err != nil || res.Loaded || len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0].String(), "d.csv.ctl:2: release: release 2025-01-01T00:00:00Z is in the past") {
		t.Fatalf("load: %+v %v", res, err)
	}
}
