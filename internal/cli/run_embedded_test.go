package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWarnEmbeddedSize(t *testing.T) {
	dir := t.TempDir()
	file := func(rows int) string {
		var b strings.Builder
		b.WriteString("externalId,amount,telecomOperator\n")
		for i := 0; i < rows; i++ {
			fmt.Fprintf(&b, "E%d,1.00,MTS\n", i)
		}
		p := filepath.Join(dir, fmt.Sprintf("f%d.csv", rows))
		if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		rows, max int
		warn      bool
	}{
		{10, 10, false},
		{11, 10, true},
		{5000, 10, true},
		{5000, 0, false},
	} {
		var out strings.Builder
		p := file(tc.rows)
		warnEmbeddedSize(&out, p, tc.max)
		got := out.String()
		if (got != "") != tc.warn {
			t.Errorf("%d rows, max %d: warning %q, want one: %v", tc.rows, tc.max, got, tc.warn)
		}
		if tc.warn && !strings.Contains(got, "payout run --redis redis://127.0.0.1:6379/0 --data-key-file data.key "+p) {
			t.Errorf("the warning shows no command line for a real Redis: %q", got)
		}
	}
}
