package loader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
)

// The control tests run on miniredis, and on a real Redis in the
// integration build (testRedisURL).

func TestParseControl(t *testing.T) {
	tests := []struct {
		name, text string
		scale      int
		rows       int
		total      string // "" : not declared
		problems   []string
	}{
		{name: "both", text: "rows=1204\ntotal=98350.50\n", rows: 1204, total: "98350.5"},
		{name: "comments, blanks, spaces, CRLF, BOM, case", text: "\uFEFF# from the ERP\r\n\r\n  Rows = 3 \r\n\tTOTAL=30.51\r\n", rows: 3, total: "30.51"},
		{name: "rows only", text: "rows=2", rows: 2},
		{name: "total only, fewer decimals", text: "total=30.5", total: "30.5"},
		{name: "whole units", text: "total=30", scale: -1, total: "30"},
		{name: "unknown key", text: "rows=3\ncount=3\ntotal=1\n", problems: []string{`:2: control: unknown key "count"`}},
		{name: "not key=value", text: "# x\nrows 3\n", problems: []string{`:2: control: "rows 3" is not key=value`}},
		{name: "repeated", text: "rows=3\nrows=4\n", problems: []string{":2: control: rows is given again (first on line 1)"}},
		{name: "grouped total", text: "total=98,350.50", problems: []string{":1: control: total=98,350.50: use '.' as the decimal separator"}},
		{name: "too many decimals", text: "total=1.005", problems: []string{":1: control: total=1.005: has more than 2 decimal places"}},
		{name: "bad rows", text: "rows=1,204\n", problems: []string{":1: control: rows=1,204: want the number of data rows"}},
		{name: "no rows", text: "rows=0\n", problems: []string{":1: control: rows=0: a payout file has at least one data row"}},
		{name: "zeros after the decimals", text: "total=30.5100", total: "30.51"},
		{name: "inline comment", text: "rows=3 # three", problems: []string{":1: control: rows=3 # three: want the number"}},
		{name: "a bare marker", text: "# empty\n\n"},
		{name: "size and sha256", text: "size=48213\nsha256=" + strings.Repeat("Ab", 32) + "\n"},
		{name: "bad size", text: "size=4.8k\n", problems: []string{":1: control: size=4.8k: want the file's length in bytes"}},
		{name: "short sha256", text: "sha256=abc\n", problems: []string{":1: control: sha256=abc: want the 64 hex digits"}},
		{name: "not text", text: "rows=\x00", problems: []string{":0: control: is not UTF-8 text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, problems, err := ParseControl("a.csv.ctl", strings.NewReader(tt.text), tt.scale)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(tt.problems) {
				t.Fatalf("problems %v, want %q", problems, tt.problems)
			}
			for i, p := range problems {
				if !strings.HasPrefix(p.String(), "a.csv.ctl") || !strings.Contains(p.String(), tt.problems[i]) {
					t.Errorf("problem %q, want it to contain %q", p, tt.problems[i])
				}
			}
			if len(problems) > 0 {
				return
			}
			if c.Rows != tt.rows || c.Source != "a.csv.ctl" {
				t.Errorf("rows %d source %q, want %d", c.Rows, c.Source, tt.rows)
			}
			if tt.total == "" && !c.Total.IsZero() || tt.total != "" && c.Total.Cmp(money.MustParse(tt.total)) != 0 {
				t.Errorf("total %s, want %q", c.Total, tt.total)
			}
		})
	}
}

// controlErr returns the file-level control error of res, if any.
func controlErr(res Result) string {
	for _, e := range res.Errors {
		if e.Column == ColumnControl {
			return e.String()
		}
	}
	return ""
}

// TestControlTotalMismatch: a file at odds with its NAME.ctl or with
// --expect-rows/--expect-total is refused with both figures named, and
// leaves nothing in Redis, though its externalIds were claimed while it
// was validated (chunks of one row); one that matches loads.
func TestControlTotalMismatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := writeFile(t, dir, "a.csv", goodCSV) // 3 rows, 30.51
	for _, tt := range []struct {
		name, ctl string
		expect    Control
		want      string
	}{
		{name: "rows", ctl: "rows=4\ntotal=30.51\n",
			want: "a.csv:0: control: control total: the file holds 3 rows totalling 30.51; a.csv.ctl declares 4 rows totalling 30.51"},
		{name: "total", ctl: "rows=3\ntotal=30.50\n",
			want: "control total: the file holds 3 rows totalling 30.51; a.csv.ctl declares 3 rows totalling 30.50"},
		{name: "total only", ctl: "total=31\n",
			want: "control total: the file holds 3 rows totalling 30.51; a.csv.ctl declares a total of 31.00"},
		{name: "flags", expect: Control{Rows: 2},
			want: "control total: the file holds 3 rows totalling 30.51; --expect-rows/--expect-total declares 2 rows"},
		{name: "flags and a matching ctl", ctl: "rows=3\n", expect: Control{Total: money.MustParse("30.52")},
			want: "--expect-rows/--expect-total declares a total of 30.52"},
		{name: "a matching flag and a ctl at odds", ctl: "rows=4\n", expect: Control{Total: money.MustParse("30.51")},
			want: "a.csv.ctl declares 4 rows"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(ControlPath(path))
			if tt.ctl != "" {
				writeFile(t, dir, "a.csv.ctl", tt.ctl)
			}
			for _, dry := range []bool{false, true} {
				res, err := f.ld.LoadFile(ctx, path, Options{ChunkSize: 1, Expect: tt.expect, DryRun: dry})
				if err != nil {
					t.Fatal(err)
				}
				if res.Loaded || !strings.Contains(controlErr(res), tt.want) || res.Rows != 3 {
					t.Fatalf("dry run %v: loaded %v, errors %v; want refused with %q", dry, res.Loaded, res.Errors, tt.want)
				}
				if n := f.keys(); n != 0 {
					t.Fatalf("dry run %v: a refused file left %d keys in Redis", dry, n)
				}
			}
		})
	}
	writeFile(t, dir, "a.csv.ctl", "# ok\nrows=3\ntotal=30.510\n")
	res, err := f.ld.LoadFile(ctx, path, Options{Expect: Control{Rows: 3, Source: ExpectFlags}})
	if err != nil || !res.Loaded || res.Registered != 3 || len(res.Control) != 2 || res.Control[1].Source != "a.csv.ctl" {
		t.Fatalf("a file that matches its declarations: %+v %v", res, err)
	}
}

// TestControlBrokenOrRequired: a control file that cannot be read as one,
// or none under RequireControl, refuses the file before anything is
// claimed.
func TestControlBrokenOrRequired(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := writeFile(t, dir, "a.csv", goodCSV)
	res, err := f.ld.LoadFile(ctx, path, Options{RequireControl: true})
	if err != nil || res.Loaded || !strings.Contains(controlErr(res), "a.csv:0: control: no control total: a.csv.ctl is not next to the file") {
		t.Fatalf("no declaration under RequireControl: %+v %v", res, err)
	}
	writeFile(t, dir, "a.csv.ctl", "rows=3\nsum=30.51\n")
	res, err = f.ld.LoadFile(ctx, path, Options{})
	if err != nil || res.Loaded || len(res.Errors) != 1 || res.Errors[0].String() != `a.csv.ctl:2: control: unknown key "sum": a control file has rows=N, total=AMOUNT, size=BYTES, sha256=HEX, submitter=NAME and release=DATE` {
		t.Fatalf("broken control file: %+v %v", res, err)
	}
	os.Remove(ControlPath(path))
	os.Mkdir(ControlPath(path), 0o750)
	res, err = f.ld.LoadFile(ctx, path, Options{})
	if err != nil || res.Loaded || !strings.Contains(controlErr(res), "a.csv.ctl:0: control: is not a regular file") {
		t.Fatalf("a directory for a control file: %+v %v", res, err)
	}
	if n := f.keys(); n != 0 {
		t.Fatalf("refused files left %d keys in Redis", n)
	}
	os.Remove(ControlPath(path))
	res, err = f.ld.LoadFile(ctx, path, Options{RequireControl: true, Expect: Control{Total: money.MustParse("30.51")}})
	if err != nil || !res.Loaded {
		t.Fatalf("declared on the command line: %+v %v", res, err)
	}
}

// TestControlWithPartial: the declared figures describe the whole file,
// invalid rows included: --partial loads the valid rows only when the
// file matches them.
func TestControlWithPartial(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	// Line 3 repeats A-1: a fault of the file, not of the row; its amount
	// is known, and part of the file's total.
	dup := writeFile(t, dir, "dup.csv", "externalId,amount,cardNumber,telecomOperator\n"+
		"A-1,10.50,4111 1111 1111 1111,\n"+"A-1,5,,MTS\n"+"A-2,20,,MTS\n")
	// Line 3 has a bad card number: its row's amount is not counted.
	badCard := writeFile(t, dir, "card.csv", "externalId,amount,cardNumber,telecomOperator\n"+
		"B-1,10.50,4111 1111 1111 1111,\n"+"B-2,5,4111 1111 1111 1112,\n"+"B-3,20,,MTS\n")
	for _, tt := range []struct {
		name, path, ctl string
		loaded          bool
		want            string
	}{
		{"the valid rows' figures are not the file's", dup, "rows=2\ntotal=30.50\n", false,
			"the file holds 3 rows totalling 35.50; dup.csv.ctl declares 2 rows totalling 30.50"},
		{"the whole file's figures", dup, "rows=3\ntotal=35.50\n", true, ""},
		{"a total that cannot be checked", badCard, "rows=3\ntotal=35.50\n", false,
			"card.csv:0: control: control total: card.csv.ctl declares a total of 35.50, which cannot be checked: of the file's 3 rows, 1 row has errors of its own, so the file's total is unknown"},
		{"rows at odds, total unknown", badCard, "rows=4\ntotal=35.50\n", false,
			"the file holds 3 rows, of unknown total (1 row has errors of its own); card.csv.ctl declares 4 rows totalling 35.50"},
		{"rows only", badCard, "rows=3\n", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, dir, filepath.Base(tt.path)+".ctl", tt.ctl)
			res, err := f.ld.LoadFile(ctx, tt.path, Options{Partial: true, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Loaded != tt.loaded || !strings.Contains(controlErr(res), tt.want) || (tt.want == "") != (controlErr(res) == "") {
				t.Fatalf("loaded %v, errors %v; want loaded %v and %q", res.Loaded, res.Errors, tt.loaded, tt.want)
			}
		})
	}
	// Without --partial, the row errors refuse the file; a total that
	// cannot be checked adds nothing to them.
	writeFile(t, dir, "card.csv.ctl", "rows=3\ntotal=35.50\n")
	res, err := f.ld.LoadFile(ctx, badCard, Options{})
	if err != nil || res.Loaded || controlErr(res) != "" || len(res.Errors) != 1 {
		t.Fatalf("without --partial: %+v %v", res, err)
	}
	if n := f.keys(); n != 0 {
		t.Fatalf("refused files left %d keys in Redis", n)
	}
}

func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestSpoolControlFiles: in a spool, NAME.ctl travels with NAME to done/
// or failed/; a mismatch writes outbox/NAME.errors.csv; a .ctl is never
// taken for a payout file; a file waits for a .ctl still being written.
func TestSpoolControlFiles(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, Inbox)
	os.MkdirAll(in, 0o750)
	const settle = time.Minute
	good := writeFile(t, in, "good.csv", goodCSV)
	goodCtl := writeFile(t, in, "good.csv.ctl", "rows=3\ntotal=30.51\n")
	bad := writeFile(t, in, "bad.csv", strings.ReplaceAll(goodCSV, "A-", "B-"))
	badCtl := writeFile(t, in, "bad.csv.ctl", "rows=3\ntotal=30.52\n")
	lone := writeFile(t, in, "lone.csv.ctl", "rows=1\n")
	fresh := writeFile(t, in, "fresh.csv", strings.ReplaceAll(goodCSV, "A-", "C-"))
	freshCtl := writeFile(t, in, "fresh.csv.ctl", "rows=3\n") // still being written
	none := writeFile(t, in, "none.csv", strings.ReplaceAll(goodCSV, "A-", "D-"))
	for _, p := range []string{good, goodCtl, bad, badCtl, lone, fresh, none} {
		age(t, p, 2*settle)
	}
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Settle: settle})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Files {
		names = append(names, r.File)
	}
	if strings.Join(names, " ") != "bad.csv good.csv none.csv" {
		t.Fatalf("files taken: %v, want bad.csv good.csv none.csv", names)
	}
	for _, p := range []string{
		filepath.Join(dir, Done, "good.csv"), filepath.Join(dir, Done, "good.csv.ctl"),
		filepath.Join(dir, Failed, "bad.csv"), filepath.Join(dir, Failed, "bad.csv.ctl"),
		filepath.Join(dir, Done, "none.csv"), lone, fresh, freshCtl,
	} {
		if !exists(p) {
			t.Errorf("missing %s", p)
		}
	}
	errs, _ := os.ReadFile(filepath.Join(dir, Outbox, "bad.csv.errors.csv"))
	if !strings.Contains(string(errs), "bad.csv,,control,control total: the file holds 3 rows totalling 30.51; bad.csv.ctl declares 3 rows totalling 30.52") {
		t.Errorf("errors file:\n%s", errs)
	}
	// Once settled, the control file goes with its file.
	age(t, freshCtl, 2*settle)
	res, err = f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Settle: settle})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || len(res.Files[0].Control) != 1 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	if !exists(filepath.Join(dir, Done, "fresh.csv.ctl")) || !exists(lone) {
		t.Errorf("fresh.csv.ctl not in done/, or lone.csv.ctl not left in inbox/")
	}
}

// TestSpoolRequireControl: under RequireControl a settled file waits in
// inbox/ for its .ctl for another settle, then fails saying why; a .ctl
// that arrives in time is checked.
func TestSpoolRequireControl(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, Inbox)
	os.MkdirAll(in, 0o750)
	const settle = time.Minute
	opts := SpoolOptions{Delivery: DeliveryRename, Settle: settle, Load: Options{RequireControl: true}}
	late := writeFile(t, in, "late.csv", goodCSV)
	never := writeFile(t, in, "never.csv", strings.ReplaceAll(goodCSV, "A-", "N-"))
	age(t, late, settle+time.Second)
	age(t, never, settle+time.Second)
	res, err := f.ld.Spool(ctx, dir, opts)
	if err != nil || len(res.Files) != 0 || !exists(late) || !exists(never) {
		t.Fatalf("settled files without their .ctl were taken: %+v %v", res, err)
	}
	age(t, writeFile(t, in, "late.csv.ctl", "rows=3\ntotal=30.51\n"), settle)
	age(t, never, 2*settle)
	res, err = f.ld.Spool(ctx, dir, opts)
	if err != nil || len(res.Files) != 2 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	if !res.Files[0].Loaded || res.Files[0].File != "late.csv" || res.Files[1].Loaded || f.keys() == 0 {
		t.Fatalf("late.csv should load, never.csv fail: %+v", res.Files)
	}
	if !exists(filepath.Join(dir, Done, "late.csv.ctl")) || !exists(filepath.Join(dir, Failed, "never.csv")) {
		t.Errorf("files not where expected")
	}
	errs, _ := os.ReadFile(filepath.Join(dir, Outbox, "never.csv.errors.csv"))
	if !strings.Contains(string(errs), "never.csv,,control,\"no control total: never.csv.ctl did not arrive within --settle (1m0s) after the file settled") {
		t.Errorf("errors file:\n%s", errs)
	}
}

// TestSpoolControlAfterACrash: a run killed between moving a file to
// processing/ and moving its .ctl leaves the .ctl in inbox/: the next run
// checks the file against it. One killed between moving a file to done/
// or failed/ and moving its .ctl leaves the .ctl alone in processing/: it
// goes to failed/, never to the next file of that name.
func TestSpoolControlAfterACrash(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, sub := range []string{Inbox, Processing} {
		os.MkdirAll(filepath.Join(dir, sub), 0o750)
	}
	writeFile(t, filepath.Join(dir, Processing), "a.csv", goodCSV)
	writeFile(t, filepath.Join(dir, Inbox), "a.csv.ctl", "rows=4\n")
	writeFile(t, filepath.Join(dir, Processing), "old.csv.ctl", "rows=1\n")
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{})
	if err != nil || len(res.Files) != 1 || res.Files[0].Loaded || !strings.Contains(controlErr(res.Files[0]), "a.csv.ctl declares 4 rows") {
		t.Fatalf("resumed file not checked against its .ctl: %+v %v", res, err)
	}
	for _, p := range []string{filepath.Join(dir, Failed, "a.csv.ctl"), filepath.Join(dir, Failed, "old.csv.ctl")} {
		if !exists(p) {
			t.Errorf("missing %s", p)
		}
	}
	if n := f.keys(); n != 0 {
		t.Fatalf("a refused file left %d keys in Redis", n)
	}
}
