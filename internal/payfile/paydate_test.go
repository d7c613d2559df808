package payfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/golden"
)

// TestPayDateColumnMissing: a --pay-date-column the header lacks refuses
// the file at its header (line 1, the column named), never ignored: with
// a near name "did you mean", else the informational columns the file
// has; a column sent to the PSP is no pay date column. The listings are
// golden (testdata/paydate).
func TestPayDateColumnMissing(t *testing.T) {
	for _, tt := range []struct {
		name, column, csv string
	}{
		{"absent", "payDate", "externalId,amount,telecomOperator,notes\nP-1,10,MTS,x\n"},
		{"no-info-columns", "payDate", "externalId,amount,telecomOperator\nP-1,10,MTS\n"},
		{"near-name", "payDate", "externalId,amount,telecomOperator,pay_dat\nP-1,10,MTS,2026-12-24\n"},
		{"psp-column", "amount", "externalId,amount,telecomOperator\nP-1,10,MTS\n"},
		{"present", "PAY DATE", "externalId,amount,telecomOperator,payDate\nP-1,10,MTS,2026-12-24\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.name+".csv")
			if err := os.WriteFile(path, []byte(tt.csv), 0o600); err != nil {
				t.Fatal(err)
			}
			opts := corpusOptions
			opts.PayDateColumn = tt.column
			_, got := listing(t, path, opts, 5*time.Second)
			if tt.name == "present" {
				if got != "" {
					t.Fatalf("a file with its pay date column refused:\n%s", got)
				}
				return
			}
			if !strings.HasPrefix(got, tt.name+".csv:1: header: ") {
				t.Errorf("not refused at the header, line 1:\n%s", got)
			}
			golden.CheckString(t, filepath.Join("testdata", "paydate", tt.name+".golden"), got)
		})
	}
}
