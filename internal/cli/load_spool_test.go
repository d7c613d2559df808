package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/xuri/excelize/v2"
)

// dtdWorkbook returns a workbook whose sheet declares an entity in a DTD
// and uses it: a file that cannot be read.
func dtdWorkbook(t *testing.T) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetRow("Sheet1", "A1", &[]any{"externalId", "amount", "telecomOperator"}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetSheetRow("Sheet1", "A2", &[]any{"X-1", "1.00", "MTS"}); err != nil {
		t.Fatal(err)
	}
	// excelize writes the sheet as-is: set the XML by hand.
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	x, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	sheet, ok := x.Pkg.Load("xl/worksheets/sheet1.xml")
	if !ok {
		t.Fatal("no sheet part")
	}
	text := string(sheet.([]byte))
	text = strings.Replace(text, "?>", `?><!DOCTYPE worksheet [<!ENTITY x "A-9">]>`, 1)
	text = strings.Replace(text, `<row r="2">`, `<row r="2"><c r="F2" t="inlineStr"><is><t>&x;</t></is></c>`, 1)
	x.Pkg.Store("xl/worksheets/sheet1.xml", []byte(text))
	out, err := x.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestLoadSpoolExitCodes: a spool holding files that cannot be read ends
// with exit 1 (they are refused to failed/, the good files load), never 3;
// a file held longer than --held-report exits 1 naming it; --delivery
// takes control or rename only.
func TestLoadSpoolExitCodes(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	good, err := os.ReadFile("../../samples/payouts-good.csv")
	if err != nil {
		t.Fatal(err)
	}
	spool := t.TempDir()
	in := filepath.Join(spool, "inbox")
	if err := os.MkdirAll(in, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"a.csv": good, "b.xlsx": dtdWorkbook(t), "c.xlsx": good[:100]} {
		if err := os.WriteFile(filepath.Join(in, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--log-level", "error", "--spool", spool, "--settle", "0s"}
	load := func(args ...string) (int, string, string) {
		return runMain(t, nil, append(append([]string{}, base...), args...)...)
	}
	code, out, errs := load("--delivery", "rename")
	if code != ExitRejected || !strings.Contains(out, "a.csv: loaded 20 rows") ||
		!strings.Contains(errs, "b.xlsx:Sheet1!1: file: the workbook is refused: its XML has a DTD") || !strings.Contains(errs, "c.xlsx:1: file: not an XLSX workbook") {
		t.Fatalf("bad files: exit %d\n%s\n--\n%s", code, out, errs)
	}
	for _, p := range []string{"done/a.csv", "failed/b.xlsx", "failed/c.xlsx", "outbox/b.xlsx.errors.csv", "outbox/c.xlsx.errors.csv"} {
		if _, err := os.Stat(filepath.Join(spool, p)); err != nil {
			t.Errorf("missing %s", p)
		}
	}
	if code, out, errs := load("--delivery", "rename"); code != ExitOK {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errs)
	}

	// The default contract: a file without its NAME.ctl is held; reported
	// (exit 1) once held longer than --held-report.
	if err := os.WriteFile(filepath.Join(in, "d.csv"), good, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := load(); code != ExitOK || out != "" {
		t.Fatalf("held file, not yet overdue: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = load("--held-report", time.Nanosecond.String())
	if code != ExitRejected || !strings.Contains(errs, "d.csv: held in inbox/ since ") || !strings.Contains(errs, "waits for its control file d.csv.ctl (--delivery control)") {
		t.Fatalf("overdue held file: exit %d\n%s", code, errs)
	}
	if code, _, errs := load("--delivery", "maybe"); code != ExitUsage || !strings.Contains(errs, "unknown delivery contract") {
		t.Fatalf("--delivery maybe: exit %d\n%s", code, errs)
	}
}
