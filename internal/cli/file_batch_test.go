package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/xuri/excelize/v2"
)

// writeBook writes a workbook of rows (the first the header) to path.
func writeBook(t *testing.T, path string, rows [][]any) {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, r := range rows {
		cell, err := excelize.CoordinatesToCellName(1, i+1)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
}

// TestCommandsFindFileByName: every command that takes a file name finds
// the batch the file's load made, for a CSV (its bytes) and a workbook
// (its cells, not its bytes): issue 43 defect 2, where a workbook was
// "not loaded" by every command but load.
func TestCommandsFindFileByName(t *testing.T) {
	dir := t.TempDir()
	csvFile := filepath.Join(dir, "june.csv")
	if err := os.WriteFile(csvFile, []byte(moneyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	book := filepath.Join(dir, "book.xlsx")
	writeBook(t, book, [][]any{
		{"externalId", "amount", "telecomOperator"},
		{"PO-X-1", "10.00", "MTS"},
		{"PO-X-2", "20.50", "MTS"},
	})
	for _, file := range []string{csvFile, book} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			url := "redis://" + miniredis.RunT(t).Addr()
			_, key := newRing(t)
			env := map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error", "PAYOUT_BY": "bob", "PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
			run := func(want int, args ...string) string {
				t.Helper()
				var out, errb bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				code := Main(ctx, append(args, "--redis", url), nil, &out, &errb, func(k string) string { return env[k] })
				if code != want {
					t.Fatalf("%s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
				}
				return out.String() + errb.String()
			}
			run(ExitOK, "load", "--max-batch-total", "1", file) // held for approval
			for _, c := range []struct {
				want int // report: 1, the batch is not final
				args []string
			}{
				{ExitOK, []string{"status", file}},
				{ExitOK, []string{"history", file}},
				{ExitRejected, []string{"report", "--out", filepath.Join(t.TempDir(), "r.csv"), file}},
				{ExitOK, []string{"approve", file}},
			} {
				if out := run(c.want, c.args...); strings.Contains(out, "has not been loaded") {
					t.Errorf("%s: %s", strings.Join(c.args, " "), out)
				}
			}
		})
	}
}
