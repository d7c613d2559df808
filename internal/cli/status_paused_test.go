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

// TestStatusShowsPausedQueue: payout status (table and --json) says a
// working batch is paused, payments on hold, while the payout queue is
// paused, where it said "working" with nothing sent (issue 43 defect 3).
func TestStatusShowsPausedQueue(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	_, key := newRing(t)
	env := map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error", "PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
	file := filepath.Join(t.TempDir(), "june.csv")
	if err := os.WriteFile(file, []byte(moneyFile), 0o600); err != nil {
		t.Fatal(err)
	}
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
	run("load", file)
	if out := run("status", file); !strings.Contains(out, "working") {
		t.Fatalf("before the pause: %s", out)
	}
	run("pause")
	out := run("status", file)
	if !strings.Contains(out, "phase     paused (payments on hold, nothing is lost") || strings.Contains(out, "working") {
		t.Errorf("paused queue, payout status says:\n%s", out)
	}
	var v struct{ PhaseCode, PhaseReason string }
	if err := json.Unmarshal([]byte(run("status", "--json", file)), &v); err != nil {
		t.Fatal(err)
	}
	if v.PhaseCode != "paused" || !strings.Contains(v.PhaseReason, "nothing is lost") {
		t.Errorf("paused queue, payout status --json: %+v", v)
	}
	run("resume")
	if out := run("status", file); !strings.Contains(out, "working") {
		t.Errorf("resumed: %s", out)
	}
}
