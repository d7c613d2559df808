package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestEveryBadFlagIsReported: a command with several bad flags names each
// of them, one line each, and exits 2, before it connects to anything.
func TestEveryBadFlagIsReported(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"worker", []string{"worker", "--psp-url", "http://127.0.0.1:1", "--concurrency", "0", "--absent-checks", "1"},
			[]string{"payout worker: --concurrency 0: must be at least 1", "payout worker: --absent-checks 1: at least 2"}},
		{"worker without PSP URL", []string{"worker", "--rate", "-1", "--outcome-intervals", "1s,soon"},
			[]string{"payout worker: --psp-url (PAYOUT_PSP_URL) is required", "payout worker: --rate -1: must not be negative",
				`payout worker: --outcome-intervals "1s,soon": "soon" is not a positive duration`}},
		{"run", []string{"run", "--sandbox", "--max-creates", "0", "--format", "xml", "--reconcile-interval", "-1s", "x.csv"},
			[]string{"payout run: --max-creates 0: must be at least 1", `payout run: --format "xml": want csv or json`,
				"payout run: --reconcile-interval -1s: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code := Main(ctx, tt.args, nil, &out, &errb, func(string) string { return "" })
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, ExitUsage, errb.String())
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			for _, w := range tt.want {
				if !slicesHasPrefix(lines, w) {
					t.Errorf("no line %q in stderr:\n%s", w, errb.String())
				}
			}
			if len(lines) != len(tt.want) {
				t.Errorf("%d lines, want %d (one per problem):\n%s", len(lines), len(tt.want), errb.String())
			}
		})
	}
}

func slicesHasPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
