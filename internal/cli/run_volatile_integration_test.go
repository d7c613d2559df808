//go:build integration

package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
)

// TestRunRefusesVolatileRedis: `payout run` against a real PSP on a
// redis-server that would lose the ledger's last writes in a crash (no
// AOF, no replica: a default install) refuses to start (exit 2), says how
// to make it durable, and sends nothing; with --allow-volatile-redis (or
// its variable) it runs, and on a server with AOF (fsync always) it runs
// without being told; fsync everysec, which loses up to 2 s of writes in
// a crash of the machine, is refused too. Before, any --redis was taken
// as durable.
func TestRunRefusesVolatileRedis(t *testing.T) {
	volatile := redistest.Start(t)
	durable := redistest.StartConfig(t, redistest.Config{AOF: true})
	everysec := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec")
	noFsync := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "no")
	for _, tc := range []struct {
		name  string
		url   string
		flags []string
		env   map[string]string
		want  int
		says  []string // in the output
	}{
		{"no AOF: refused", volatile.URL(), nil, nil, ExitUsage,
			[]string{"appendonly=no", "`appendonly yes`", "`appendfsync always`", "--wait-replicas", "--allow-volatile-redis", "PAYOUT_ALLOW_VOLATILE_REDIS=true"}},
		{"AOF without fsync: refused", noFsync.URL(), nil, nil, ExitUsage, []string{"appendfsync=no"}},
		{"no AOF, --allow-volatile-redis", volatile.DB(1), []string{"--allow-volatile-redis"}, nil, ExitOK, nil},
		{"no AOF, PAYOUT_ALLOW_VOLATILE_REDIS", volatile.DB(2), nil, map[string]string{"PAYOUT_ALLOW_VOLATILE_REDIS": "true"}, ExitOK, nil},
		{"AOF, fsync always", durable.URL(), nil, nil, ExitOK, nil},
		{"AOF, fsync everysec: refused", everysec.URL(), nil, nil, ExitUsage, []string{"appendfsync=everysec: a crash of the machine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sandbox.DefaultConfig()
			cfg.Seed = 3
			sbx := sandbox.New(cfg, zerolog.Nop())
			srv := httptest.NewServer(sbx.Handler())
			defer srv.Close()
			env := map[string]string{"PAYOUT_PSP_TOKEN": cfg.Token}
			for k, v := range tc.env {
				env[k] = v
			}
			out := filepath.Join(t.TempDir(), "r.csv")
			args := []string{"run", "--psp-url", srv.URL, "--redis", tc.url, "--insecure-plaintext", "--out", out,
				"--track-outcome=false", "--status-delay", "100ms", "--psp-timeout", "1s", "--log-level", "error"}
			args = append(append(args, tc.flags...), "../../samples/payouts-good.csv")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := Main(ctx, args, nil, &stdout, &stderr, func(k string) string { return env[k] })
			got := stdout.String() + stderr.String()
			if code != tc.want {
				t.Fatalf("exit %d, want %d\n%s", code, tc.want, got)
			}
			for _, w := range tc.says {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			n := len(sbx.Orders())
			if tc.want == ExitUsage && n != 0 {
				t.Errorf("refused, yet the PSP has %d orders", n)
			}
			if tc.want == ExitOK && n == 0 {
				t.Errorf("ran, yet the PSP has no order")
			}
		})
	}
}
