package loader

// Control totals: a payout file may declare what it holds, so that a file
// cut short or altered on its way is refused rather than paid.
//
// The declaration is a sidecar NAME.ctl next to the file NAME (in a spool,
// it moves with the file to processing/, done/ or failed/), or, for one
// file given on the command line, --expect-rows and --expect-total. Both
// are checked when both are given. A sidecar is text:
//
//	# payouts-2024-05-31.csv, written by the ERP
//	rows=1204
//	total=98350.50
//
// one key=value a line (spaces around either are ignored), full-line #
// comments and blank lines allowed. rows is the number of data rows of the
// file (the header and blank lines not counted); total the exact sum of the
// amounts of all those rows, written plain (digits, '.' before at most the
// file's number of decimals: 98350.50, never 98,350.50, whatever
// --amount-format says). Two more keys describe the bytes delivered:
// size (the file's length in bytes) and sha256 (the hex SHA-256 of its
// bytes); the spool holds a file shorter than its declared size (still
// arriving, spool.go), and a file of another size or hash is refused.
// release=DATE (a date YYYY-MM-DD or an RFC 3339 time) holds the file's
// payouts, scheduled, until then (release.go).
// submitter=NAME names the person who prepared the file: a spool batch is
// recorded as loaded by them (four-eyes refuses them as its approver),
// otherwise by its delivery account as a system identity. Each
// key is given at most once; any other key, or a line that is not
// key=value, refuses the file with the line named. A control file that
// declares nothing (empty, or comments only) is a bare delivery marker:
// the spool's --delivery control takes the file once it is there, and
// nothing is checked (--require-control wants rows or total).
//
// The declared figures describe the file as written, so they are compared
// with all its data rows and the sum of all their amounts, with --partial
// too (not with the rows that would load). The sum of all the amounts is
// known only when every row is valid on its own (a row whose only fault is
// a repeated externalId counts): with --partial, a file whose declared
// total cannot be checked for that reason is refused. A mismatch refuses
// the whole file, whatever --partial says, before anything is registered;
// the externalIds claimed while validating are released as for any refused
// file (Loader.release).

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/schedule"
)

// ControlExt ends the name of a control file: NAME.ctl declares what the
// payout file NAME holds.
const ControlExt = ".ctl"

// ColumnControl is the payfile.Error.Column of control total problems.
const ColumnControl = "control"

// ExpectFlags names the command-line declaration in messages.
const ExpectFlags = "--expect-rows/--expect-total"

// maxControlBytes bounds a control file: a few lines are expected.
const maxControlBytes = 64 << 10

// Control is what a payout file declares it holds.
type Control struct {
	Source string       // who declares: "NAME.ctl" or ExpectFlags
	Rows   int          // data rows; 0: not declared
	Total  money.Amount // sum of the amounts of every row; zero: not declared
	Size   int64        // the file's length in bytes; 0: not declared
	SHA256 string       // hex SHA-256 of the file's bytes, lower case; "": not declared
	// Submitter is the person who prepared the file (submitter=NAME,
	// identity.Canonical): a spool batch is recorded as loaded by them,
	// so four-eyes refuses them as approver. "": not named.
	Submitter string
	// Release is when the file's payouts may leave (release=, a date
	// YYYY-MM-DD or an RFC 3339 time, as payout load --release-at), as
	// written, and ReleaseLine its line: checked against the release
	// rules when the file is loaded (release.go). "": not given.
	Release     string
	ReleaseLine int
}

// Declared reports whether c declares what the file holds (rows or total).
func (c Control) Declared() bool { return c.Rows > 0 || !c.Total.IsZero() }

// DeclaresBytes reports whether c declares the delivered bytes (size or
// sha256): a file that matches them is complete, whatever its last line.
func (c Control) DeclaresBytes() bool { return c.Size > 0 || c.SHA256 != "" }

// ControlPath is the path of the control file of the payout file at path.
func ControlPath(path string) string { return path + ControlExt }

// IsControlFile reports whether name is a control file's (never a payout
// file).
func IsControlFile(name string) bool { return strings.HasSuffix(name, ControlExt) }

// ReadControl reads the control file at path. A missing file is no error:
// found is false. Problems of its content are returned as errors of the
// control file (File: its base name), one per line at fault.
func ReadControl(path string, scale int) (c Control, found bool, problems []payfile.Error, err error) {
	name := filepath.Base(path)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, false, nil, nil
	case err != nil:
		return c, false, nil, fmt.Errorf("control file: %w", err)
	case !info.Mode().IsRegular():
		return c, true, []payfile.Error{{File: name, Line: 0, Column: ColumnControl, Kind: payfile.KindField,
			Message: "is not a regular file: a control file is text, rows=N and total=AMOUNT"}}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return c, false, nil, fmt.Errorf("control file: %w", err)
	}
	defer f.Close()
	c, problems, err = ParseControl(name, f, scale)
	return c, true, problems, err
}

// ParseControl reads a control file named name (for messages) from r.
// scale is the file's number of decimals as payfile.Options has it (0:
// money.DefaultScale; negative: whole units).
func ParseControl(name string, r io.Reader, scale int) (Control, []payfile.Error, error) {
	c := Control{Source: name}
	data, err := io.ReadAll(io.LimitReader(r, maxControlBytes+1))
	if err != nil {
		return c, nil, fmt.Errorf("control file %s: %w", name, err)
	}
	var problems []payfile.Error
	bad := func(line int, format string, args ...any) {
		problems = append(problems, payfile.Error{File: name, Line: line, Column: ColumnControl, Kind: payfile.KindField,
			Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(data) > maxControlBytes:
		bad(0, "is over %d KB: not a control file (a few lines of rows= and total=)", maxControlBytes>>10)
		return c, problems, nil
	case !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0:
		bad(0, "is not UTF-8 text: a control file has lines rows=N and total=AMOUNT")
		return c, problems, nil
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxControlBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			bad(n, "%q is not key=value: a control file has lines rows=N and total=AMOUNT (and # comments)", clip(line))
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		if key != "rows" && key != "total" && key != "size" && key != "sha256" && key != "submitter" && key != "release" {
			bad(n, "unknown key %q: a control file has rows=N, total=AMOUNT, size=BYTES, sha256=HEX, submitter=NAME and release=DATE", clip(key))
			continue
		}
		if first, dup := seen[key]; dup {
			bad(n, "%s is given again (first on line %d)", key, first)
			continue
		}
		seen[key] = n
		if msg := c.setField(key, val, scale); msg != "" {
			bad(n, "%s", msg)
		} else if key == "release" {
			c.ReleaseLine = n
		}
	}
	if err := sc.Err(); err != nil {
		return c, nil, fmt.Errorf("control file %s: %w", name, err)
	}
	return c, problems, nil
}

// setField sets the field of key (rows, total, size or sha256) from the value
// val of a control file's line; it returns what is wrong with the line ("":
// nothing), and then leaves c as it was.
func (c *Control) setField(key, val string, scale int) string {
	switch key {
	case "rows":
		rows, msg := parseRows(val)
		if msg != "" {
			return fmt.Sprintf("rows=%s: %s", clip(val), msg)
		}
		c.Rows = rows
	case "total":
		a, msg := parseControlTotal(val, scale)
		if msg != "" {
			return fmt.Sprintf("total=%s: %s (write the exact sum of the file's amounts plain, as 98350.50)", clip(val), msg)
		}
		c.Total = a
	case "size":
		size, msg := parseCount(val, "want the file's length in bytes, digits only (48213)", "a payout file is never empty")
		if msg != "" {
			return fmt.Sprintf("size=%s: %s", clip(val), msg)
		}
		c.Size = int64(size)
	case "sha256":
		v := strings.ToLower(val)
		if len(v) != sha256.Size*2 || strings.Trim(v, "0123456789abcdef") != "" {
			return fmt.Sprintf("sha256=%s: want the 64 hex digits of the file's SHA-256 (sha256sum prints them)", clip(val))
		}
		c.SHA256 = v
	case "submitter":
		who, err := identity.Canonical(val)
		if err != nil {
			return fmt.Sprintf("submitter=: %v (the person who prepared the file, as they sign in)", err)
		}
		c.Submitter = who
	case "release":
		if _, err := (schedule.Rules{}).Parse(val); err != nil {
			return fmt.Sprintf("release=: %v", err)
		}
		c.Release = val
	}
	return ""
}

// parseControlTotal reads a control file's total=, an amount with at most the
// file's decimals; it returns what is wrong with it ("": nothing).
func parseControlTotal(val string, scale int) (money.Amount, string) {
	a, err := money.Parse(val, 18)
	if err == nil && !a.Decimal().Equal(a.Decimal().Truncate(int32(payfile.Options{Scale: scale}.Decimals()))) {
		err = &money.ParseError{Input: val, Reason: fmt.Sprintf("has more than %d decimal places (--decimals)", payfile.Options{Scale: scale}.Decimals())}
	}
	if err != nil {
		var pe *money.ParseError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Reason
		}
		return a, msg
	}
	return a, ""
}

// parseRows reads a declared row count (rows= of a NAME.ctl): a positive
// whole number, digits only; the message says what is wrong, else it is "".
func parseRows(s string) (int, string) {
	return parseCount(s, "want the number of data rows, digits only (1204)", "a payout file has at least one data row")
}

// parseCount reads a positive whole number, digits only (at most 10^12);
// the message says what is wrong (notDigits, or zero for 0), else it is "".
func parseCount(s, notDigits, zero string) (int, string) {
	if s == "" {
		return 0, "is empty"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, notDigits
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > 1_000_000_000_000 {
		return 0, "is too large"
	}
	if n == 0 {
		return 0, zero
	}
	return int(n), ""
}

func clip(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		return string([]rune(s)[:40]) + "…"
	}
	return s
}

// declarations gathers what the file at path declares: the command line's
// (opts.Expect), then its sidecar's. Problems of the sidecar, or no
// declaration under opts.RequireControl, refuse the file before it is
// read.
func declarations(path, name string, opts Options) ([]Control, []payfile.Error, error) {
	var decls []Control
	if opts.Expect.Declared() {
		e := opts.Expect
		if e.Source == "" {
			e.Source = ExpectFlags
		}
		decls = append(decls, e)
	}
	ctl, found, problems, err := ReadControl(ControlPath(path), opts.File.Scale)
	if err != nil || len(problems) > 0 {
		return nil, problems, err
	}
	if found {
		if problems, err := checkBytes(path, ctl); err != nil || len(problems) > 0 {
			return nil, problems, err
		}
		if ctl.Declared() {
			decls = append(decls, ctl)
		}
	}
	if len(decls) == 0 && opts.RequireControl {
		msg := fmt.Sprintf("no control total: %s is not next to the file, and it must declare what it holds (--require-control): rows=N and total=AMOUNT in %s, or %s",
			name+ControlExt, name+ControlExt, ExpectFlags)
		switch {
		case found:
			msg = fmt.Sprintf("no control total: %s declares neither rows nor total, and the file must declare what it holds (--require-control): add rows=N and total=AMOUNT to it",
				name+ControlExt)
		case opts.controlWait > 0:
			msg = fmt.Sprintf("no control total: %s did not arrive within --settle (%s) after the file settled, and the file must declare what it holds (--require-control)",
				name+ControlExt, opts.controlWait)
		}
		return nil, []payfile.Error{{File: name, Line: 0, Column: ColumnControl, Kind: payfile.KindField, Message: msg}}, nil
	}
	return decls, nil, nil
}

// checkBytes compares the size and SHA-256 a control file declares with
// the file at path: a file of other bytes than its sender wrote (cut
// short, grown, altered) is refused before it is read.
func checkBytes(path string, c Control) ([]payfile.Error, error) {
	if !c.DeclaresBytes() {
		return nil, nil
	}
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("control file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("control file: %w", err)
	}
	bad := func(format string, args ...any) []payfile.Error {
		return []payfile.Error{{File: name, Line: 0, Column: ColumnControl, Kind: payfile.KindField,
			Message: "control file: " + fmt.Sprintf(format, args...)}}
	}
	if c.Size > 0 && info.Size() != c.Size {
		return bad("the file is %d bytes; %s declares size=%d", info.Size(), c.Source, c.Size), nil
	}
	if c.SHA256 == "" {
		return nil, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("control file: hash %s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != c.SHA256 {
		return bad("the file's SHA-256 is %s; %s declares sha256=%s", got, c.Source, c.SHA256), nil
	}
	return nil, nil
}

// tally counts, during the validation pass, the rows valid on their own
// (payfile hands them to onRow, repeats of an externalId included) and the
// sum of their amounts.
type tally struct {
	rows  int
	total money.Amount
}

func (t *tally) add(r payfile.Row) {
	t.rows++
	t.total = t.total.Add(r.Amount)
}

// checkControl compares each declaration with what the file holds: all its
// data rows, and the sum of all their amounts when every row's amount is
// known. It returns one file-level error per declaration at odds with the
// file.
func checkControl(name string, decls []Control, sum payfile.Summary, t tally, partial bool, scale int) []payfile.Error {
	if len(decls) == 0 || sum.Aborted {
		// An aborted file is refused anyway; its rows after the failure
		// were never read.
		return nil
	}
	scale = payfile.Options{Scale: scale}.Decimals()
	total := money.Zero.Add(t.total)
	totalKnown := t.rows == sum.Rows
	var errs []payfile.Error
	for _, d := range decls {
		rowsOff := d.Rows > 0 && d.Rows != sum.Rows
		totalOff := !d.Total.IsZero() && totalKnown && d.Total.Cmp(total) != 0
		unknown := !d.Total.IsZero() && !totalKnown
		var msg string
		switch {
		case rowsOff || totalOff:
			holds := plural(sum.Rows, "row")
			if totalKnown {
				holds += " totalling " + fmtAmount(total, scale)
			} else {
				holds += fmt.Sprintf(", of unknown total (%s)", ownErrors(sum.Rows-t.rows))
			}
			msg = fmt.Sprintf("control total: the file holds %s; %s declares %s", holds, d.Source, declared(d, scale))
		case unknown && partial:
			msg = fmt.Sprintf("control total: %s declares a total of %s, which cannot be checked: of the file's %s, %s, so the file's total is unknown; with --partial the declared figures are still compared with the whole file: correct those rows",
				d.Source, fmtAmount(d.Total, scale), plural(sum.Rows, "row"), ownErrors(sum.Rows-t.rows))
		default:
			continue
		}
		errs = append(errs, payfile.Error{File: name, Line: 0, Column: ColumnControl, Kind: payfile.KindField, Message: msg})
	}
	return errs
}

// ownErrors says that n rows have errors of their own (their amounts are
// not counted).
func ownErrors(n int) string {
	if n == 1 {
		return "1 row has errors of its own"
	}
	return strconv.Itoa(n) + " rows have errors of their own"
}

func declared(d Control, scale int) string {
	switch {
	case d.Rows > 0 && !d.Total.IsZero():
		return plural(d.Rows, "row") + " totalling " + fmtAmount(d.Total, scale)
	case d.Rows > 0:
		return plural(d.Rows, "row")
	}
	return "a total of " + fmtAmount(d.Total, scale)
}

// fmtAmount writes a plain amount with at least the file's decimals, as a
// control file writes it.
func fmtAmount(a money.Amount, scale int) string {
	if d := a.Decimal(); !d.Equal(d.Truncate(int32(scale))) {
		return a.String()
	}
	return a.StringFixed(scale)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// moveControl moves the control file of the payout file moved from from to
// to, if it has one, and returns where it went ("" for none).
func moveControl(from, to string) (string, error) {
	src := ControlPath(from)
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	dst := uniquePath(ControlPath(to))
	if err := os.Rename(src, dst); err != nil {
		return "", fmt.Errorf("spool: move %s: %w", filepath.Base(src), err)
	}
	return dst, nil
}

// tidyControls repairs what a run killed between moving a payout file and
// moving its control file left: a file in processing/ whose .ctl is still
// in inbox/ gets it back (it is checked when the file is resumed), and a
// .ctl alone in processing/ (its file moved on) goes to failed/. It then
// says which control files wait in inbox/ without their payout file: one
// that came after its file was taken would be checked against the next
// file of that name.
func (ld *Loader) tidyControls(dir string, left []string, settle time.Duration, now time.Time) error {
	inbox, processing := filepath.Join(dir, Inbox), filepath.Join(dir, Processing)
	for _, name := range left {
		p := filepath.Join(processing, name)
		if _, err := os.Lstat(ControlPath(p)); err == nil {
			continue
		}
		if _, err := os.Lstat(ControlPath(filepath.Join(inbox, name))); err != nil {
			continue
		}
		if _, err := moveControl(filepath.Join(inbox, name), p); err != nil {
			return err
		}
		ld.log.Warn().Str("file", name).Msg("control file brought back to processing/ beside its payout file (a killed run left it in inbox/)")
	}
	for _, sub := range []string{Processing, Inbox} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		for _, e := range entries {
			n := e.Name()
			if !IsControlFile(n) || strings.HasPrefix(n, ".") {
				continue
			}
			file := strings.TrimSuffix(n, ControlExt)
			if hasPayoutFile(filepath.Join(dir, sub), file) {
				continue
			}
			if sub == Inbox {
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) >= settle {
					ld.log.Warn().Str("control", n).Msg("control file without its payout file in inbox/: it waits for it; if it came after its file was taken, remove it, or it is checked against the next file of that name")
				}
				continue
			}
			to, err := moveControl(filepath.Join(processing, file), filepath.Join(dir, Failed, file))
			if err != nil {
				return err
			}
			ld.log.Warn().Str("control", n).Str("to", to).Msg("control file left alone in processing/ by a killed run (its payout file moved on): moved to failed/")
		}
	}
	return nil
}

// hasPayoutFile reports whether the payout file name (or its upload under
// .part or .tmp) is in dir.
func hasPayoutFile(dir, name string) bool {
	for _, n := range []string{name, name + ".part", name + ".tmp"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}
