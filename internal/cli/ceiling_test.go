package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestLoadRefusesAmountsThatWouldWrap is issue 38's "money arithmetic
// wraps" through payout load: with --max-amount unset, two rows of
// 922337153685477.58 are refused with their lines and nothing is written
// (before, they loaded and wrapped the day's approved sum); a --max-amount
// above the ceiling is a usage error; a file whose total passes the
// ceiling is refused at the row that passes it, --partial or not.
func TestLoadRefusesAmountsThatWouldWrap(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	_, key := newRing(t)
	env := map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error", "PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
	dir := t.TempDir()
	write := func(name string, amounts ...string) string {
		t.Helper()
		var b strings.Builder
		b.WriteString("externalId,amount,telecomOperator\n")
		for i, a := range amounts {
			b.WriteString(name + "-" + string(rune('A'+i)) + "," + a + ",MTS\n")
		}
		path := filepath.Join(dir, name+".csv")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	wrap := write("wrap", "922337153685477.58", "922337153685477.58")
	total := write("total", "500000000000.00", "400000000000.00", "719925474.10")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"rows above the default ceiling", []string{"load", "--by", "alice", wrap}, ExitRejected,
			[]string{"wrap.csv:2: amount:", "wrap.csv:3: amount:", "is above the maximum"}},
		{"a maximum above the ceiling", []string{"load", "--by", "alice", "--max-amount", "900719925474.10", wrap}, ExitUsage,
			[]string{"--max-amount 900719925474.10: above 900719925474.09"}},
		{"a total above the ceiling", []string{"load", "--by", "alice", "--max-amount", "900719925474.09", "--partial", total}, ExitRejected,
			[]string{"total.csv:4: amount:", "takes the file's total from"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runMain(t, env, append(tt.args, "--redis", url)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(out+errs, w) {
					t.Errorf("output lacks %q:\n%s%s", w, out, errs)
				}
			}
		})
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	// Nothing of the refused files; the data key's fingerprint, which a
	// load records for the workers' start-up check, is no part of a file.
	keys, err := rdb.Keys(context.Background(), "*").Result()
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, ":datakey") })
	if err != nil || len(keys) != 0 {
		t.Errorf("refused loads left keys %v (%v)", keys, err)
	}
}
