package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestStatusSaysScheduled: payout status prints "scheduled: N payouts,
// next release TIME" under the table of a batch whose payouts wait for
// their release time, and --json gives the batch's nextRelease; a batch
// without a schedule says neither.
func TestStatusSaysScheduled(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	_, key := newRing(t)
	env := map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error", "PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if code := Main(ctx, append(args, "--redis", url), nil, &out, &errb, func(k string) string { return env[k] }); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String()
	}
	dir := t.TempDir()
	now, later := filepath.Join(dir, "now.csv"), filepath.Join(dir, "later.csv")
	if err := os.WriteFile(now, []byte(moneyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(later, []byte(strings.ReplaceAll(moneyFile, "PO-W-", "PO-L-")), 0o600); err != nil {
		t.Fatal(err)
	}
	run("load", now)
	if out := run("status", now); strings.Contains(out, "scheduled:") {
		t.Errorf("a batch without a schedule:\n%s", out)
	}
	release := time.Now().UTC().AddDate(0, 0, 3).Truncate(time.Hour)
	run("load", "--release-at", release.Format(time.RFC3339), later)
	want := "scheduled: 3 payouts, next release " + release.Format(time.RFC3339) + "\n"
	for _, args := range [][]string{{"status"}, {"status", later}} {
		if out := run(args...); !strings.Contains(out, want) {
			t.Errorf("%s does not say %q:\n%s", strings.Join(args, " "), want, out)
		}
	}
	var v struct {
		NextRelease time.Time `json:"nextRelease"`
	}
	if err := json.Unmarshal([]byte(run("status", "--json", later)), &v); err != nil || !v.NextRelease.Equal(release) {
		t.Errorf("--json nextRelease = %v, %v; want %v", v.NextRelease, err, release)
	}
	if out := run("status", "--json", now); strings.Contains(out, "nextRelease") {
		t.Errorf("--json of a batch without a schedule:\n%s", out)
	}
}
