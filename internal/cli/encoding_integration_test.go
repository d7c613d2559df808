//go:build integration

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/proof/testlog"
	"github.com/rs/zerolog"
)

// TestReadHashLimitsRedisServer reads the limits of real redis-servers
// (Redis's defaults, deploy/redis.conf's value, few entries, CONFIG
// renamed away as on a managed Redis) and checks the advice, and that
// reading changes nothing.
func TestReadHashLimitsRedisServer(t *testing.T) {
	for _, tc := range []struct {
		name           string
		extra          []string
		value, entries string
		level          zerolog.Level
		want           string
	}{
		{"Redis's defaults", nil, "64", "512", zerolog.WarnLevel, "hash-max-listpack-value is 64, below the 512"},
		{"deploy/redis.conf", []string{"--hash-max-listpack-value", "512"}, "512", "512", zerolog.NoLevel, ""},
		{"few entries", []string{"--hash-max-listpack-value", "512", "--hash-max-listpack-entries", "64"}, "512", "64", zerolog.WarnLevel,
			"hash-max-listpack-entries is 64, below the 128"},
		{"CONFIG refused", []string{"--rename-command", "CONFIG", ""}, "", "", zerolog.InfoLevel, "could not be checked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Start(t, tc.extra...).ClientT(t)
			ctx := context.Background()
			h, err := readHashLimits(ctx, rdb)
			if h.value != tc.value || h.entries != tc.entries {
				t.Fatalf("read %+v (%v), want value %q entries %q", h, err, tc.value, tc.entries)
			}
			level, msg := h.advice(err)
			if level != tc.level || !strings.Contains(msg, tc.want) {
				t.Fatalf("advice %v %q, want %v with %q", level, msg, tc.level, tc.want)
			}
			if err != nil {
				return
			}
			var buf bytes.Buffer
			checkHashLimits(ctx, rdb, zerolog.New(&buf))
			if again, _ := readHashLimits(ctx, rdb); again != h {
				t.Fatalf("the check changed the limits: %+v, then %+v", h, again)
			}
			if logged := strings.Contains(buf.String(), `"level":"warn"`); logged != (tc.level == zerolog.WarnLevel) {
				t.Fatalf("logged %q", buf.String())
			}
		})
	}
}

// TestStartWarnsOfHashLimits: payout worker and payout load on a
// redis-server with Redis's default hash-max-listpack-value warn once,
// naming the value, the one wanted and the fix, and go on.
func TestStartWarnsOfHashLimits(t *testing.T) {
	url := redistest.Start(t).URL()
	const warning = `"level":"warn","durability":"volatile-accepted","hash_max_listpack_value":"64","hash_max_listpack_entries":"512",`
	env := func(k string) string { return map[string]string{"PAYOUT_PSP_TOKEN": "t"}[k] }
	t.Run("load", func(t *testing.T) {
		var out, errs bytes.Buffer
		code := Main(context.Background(), []string{"load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--log-format", "json",
			"../../samples/payouts-good.csv"}, nil, &out, &errs, env)
		if code != ExitOK || strings.Count(errs.String(), warning) != 1 ||
			!strings.Contains(errs.String(), "hash-max-listpack-value is 64, below the 512") ||
			!strings.Contains(errs.String(), "fix: CONFIG SET hash-max-listpack-value 512") {
			t.Fatalf("exit %d, want 0 and one warning:\n%s", code, errs.String())
		}
	})
	t.Run("worker", func(t *testing.T) {
		var errs testlog.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, []string{"worker", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--log-format", "json", "--metrics-addr", "",
				"--psp-url", "http://" + testenv.ClosedAddr(t)}, nil, &bytes.Buffer{}, &errs, env)
		}()
		testenv.Eventually(t, "the worker's warning", func() bool {
			select {
			case code := <-done:
				t.Fatalf("worker exit %d:\n%s", code, errs.String())
			default:
			}
			return strings.Contains(errs.String(), warning)
		})
		cancel()
		if code := <-done; code != ExitOK || strings.Count(errs.String(), warning) != 1 {
			t.Fatalf("worker exit %d, want 0 and one warning:\n%s", code, errs.String())
		}
	})
}
