//go:build integration

package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
)

// TestWorkerStartChecks: through the real binary, a worker whose data key
// is not the loader's, or whose PSP token the PSP refuses, refuses to
// start (exit 2) with a message that says what to fix and shows no key or
// token; a worker with a stale key among its old ones, the right current
// key and the right token starts and pays the card payout. On the code
// before, both misconfigured workers started without a word.
func TestWorkerStartChecks(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	redisURL := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	cfg := sandbox.DefaultConfig()
	sbx := sandbox.New(cfg, zerolog.Nop())
	psp := httptest.NewServer(sbx.Handler())
	defer psp.Close()
	loaderKey, otherKey := mustGenKey(t), mustGenKey(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "payouts.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,cardNumber,telecomOperator\nWS-1,10.50,4111 1111 1111 1111,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, env []string, args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		u, p, err := proc.Run(ctx, proc.Spec{Name: name, Bin: bin, Args: args, Env: testenv.CleanEnv(env...)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stdout, stderr := p.Output()
		return u.ExitCode, stdout + stderr
	}
	if code, out := run("payout load", []string{"PAYOUT_DATA_KEY=" + loaderKey}, "load", "--redis", redisURL, "--log-level", "error", file); code != ExitOK {
		t.Fatalf("load: exit %d\n%s", code, out)
	}
	workerArgs := []string{"worker", "--redis", redisURL, "--psp-url", psp.URL, "--metrics-addr", "", "--track-outcome=false", "--log-format", "json"}
	loaderID, _ := vault.KeyIDOf(loaderKey)
	otherID, _ := vault.KeyIDOf(otherKey)
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"another data key", []string{"PAYOUT_DATA_KEY=" + otherKey, "PAYOUT_PSP_TOKEN=" + cfg.Token},
			[]string{"cannot open the card numbers the loader seals", "seals with key " + loaderID, "holds key(s) " + otherID, "PAYOUT_DATA_KEYS_OLD"}},
		{"no data key (plaintext)", []string{"PAYOUT_PSP_TOKEN=" + cfg.Token},
			[]string{"this worker has no data key", loaderID}},
		{"stale PSP token", []string{"PAYOUT_DATA_KEY=" + loaderKey, "PAYOUT_PSP_TOKEN=stale-token-0123456789"},
			[]string{"PSP check at start", "refused the token", "--skip-psp-check"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := workerArgs
			if !strings.Contains(strings.Join(tc.env, " "), "PAYOUT_DATA_KEY=") {
				args = append(append([]string{}, args...), "--insecure-plaintext")
			}
			code, out := run("payout worker", tc.env, args...)
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d (refused start)\n%s", code, ExitUsage, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, secret := range []string{loaderKey, otherKey, "stale-token-0123456789", cfg.Token} {
				if strings.Contains(out, secret) {
					t.Errorf("output shows a key or token:\n%s", out)
				}
			}
		})
	}
	if len(sbx.Orders()) != 0 {
		t.Fatalf("a refused worker sent %d creates", len(sbx.Orders()))
	}

	// Right key (the other one is an old key of its ring), right token.
	p := proc.StartT(t, proc.Spec{Name: "payout worker", Bin: bin, Args: workerArgs,
		Env: testenv.CleanEnv("PAYOUT_DATA_KEY="+loaderKey, "PAYOUT_DATA_KEYS_OLD="+otherKey, "PAYOUT_PSP_TOKEN="+cfg.Token)})
	err := testenv.Poll(context.Background(), time.Minute, 50*time.Millisecond, func() (bool, error) {
		return len(sbx.Orders()) == 1 || p.Exited(), nil
	})
	if err != nil || p.Exited() {
		t.Fatalf("good worker: %v, exited %v\n%s", err, p.Exited(), p.Tail(30))
	}
	if u, err := p.Stop(20 * time.Second); err != nil || u.ExitCode != ExitOK {
		t.Fatalf("good worker stop: %v, exit %d\n%s", err, u.ExitCode, p.Tail(30))
	}
	if _, stderr := p.Output(); !strings.Contains(stderr, "the token was accepted") || !strings.Contains(stderr, "opens what the loader seals") {
		t.Errorf("good worker did not log its start checks:\n%s", stderr)
	}
}

func mustGenKey(t *testing.T) string {
	t.Helper()
	k, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
