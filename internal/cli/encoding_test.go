package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/alicebob/miniredis/v2"
	"github.com/rs/zerolog"
)

// TestHashLimitsAdvice: a limit below what the sizing rule assumes is one
// warning naming each low limit, its value, the value wanted and the fix;
// limits that cannot be read are an info line; good limits say nothing.
func TestHashLimitsAdvice(t *testing.T) {
	refused := errors.New("ERR unknown command 'CONFIG'")
	for _, tc := range []struct {
		name  string
		h     hashLimits
		err   error
		level zerolog.Level
		want  []string // in the message
		not   []string // never in the message
	}{
		{"deploy/redis.conf", hashLimits{value: "512", entries: "128"}, nil, zerolog.NoLevel, nil, nil},
		{"above", hashLimits{value: "4096", entries: "1024"}, nil, zerolog.NoLevel, nil, nil},
		{"Redis's default value", hashLimits{value: "64", entries: "128"}, nil, zerolog.WarnLevel,
			[]string{"hash-max-listpack-value is 64, below the 512", "CONFIG SET hash-max-listpack-value 512", "deploy/redis.conf", "150 B"},
			[]string{"hash-max-listpack-entries"}},
		{"value just below", hashLimits{value: "511", entries: "128"}, nil, zerolog.WarnLevel,
			[]string{"hash-max-listpack-value is 511, below the 512"}, nil},
		{"few entries", hashLimits{value: "512", entries: "64"}, nil, zerolog.WarnLevel,
			[]string{"hash-max-listpack-entries is 64, below the 128", "CONFIG SET hash-max-listpack-entries 128", "claim buckets"},
			[]string{"hash-max-listpack-value", "Asynq task"}},
		{"both low", hashLimits{value: "0", entries: "0"}, nil, zerolog.WarnLevel,
			[]string{"hash-max-listpack-value is 0, below the 512", "hash-max-listpack-entries is 0, below the 128",
				"CONFIG SET hash-max-listpack-value 512 and CONFIG SET hash-max-listpack-entries 128"}, nil},
		{"CONFIG refused", hashLimits{}, refused, zerolog.InfoLevel,
			[]string{"could not be checked", "unknown command 'CONFIG'", "hash-max-listpack-value 512"}, []string{"CONFIG SET"}},
		{"names unknown to this Redis", hashLimits{}, nil, zerolog.InfoLevel,
			[]string{"could not be checked", `hash-max-listpack-value answered ""`}, []string{"CONFIG SET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level, msg := tc.h.advice(tc.err)
			if level != tc.level {
				t.Fatalf("level %v, want %v: %q", level, tc.level, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %q", w, msg)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("message has %q: %q", n, msg)
				}
			}
			if level == zerolog.NoLevel && msg != "" {
				t.Errorf("nothing to say, yet %q", msg)
			}
		})
	}
}

// TestHashLimitsCheckedOnARealRedisOnly: load and run on a Redis of
// their own check its limits (miniredis refuses CONFIG GET: the info
// line), payout run on its embedded Redis and load --dry-run do not; none
// fails because of it. The worker, which needs INFO replication, is
// checked against a real redis-server (TestStartWarnsOfHashLimits).
func TestHashLimitsCheckedOnARealRedisOnly(t *testing.T) {
	const line = "redis hash encoding limits could not be checked"
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	env := map[string]string{"PAYOUT_DATA_KEY": "", "PAYOUT_PSP_TOKEN": "t"}
	file := "../../samples/payouts-good.csv"
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		checked bool
	}{
		{"load --dry-run", []string{"load", "--redis", url, "--dry-run", file}, ExitOK, false},
		{"load", []string{"load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--approval", "required", "--by", "ann", file}, ExitOK, true},
		// The file is loaded already (the case above): run resumes its
		// batch, which awaits approval, and stops waiting at --timeout.
		{"run on a Redis of its own", []string{"run", "--redis", url, "--insecure-plaintext", "--sandbox", "--approval", "required", "--timeout", "500ms", "--out", filepath.Join(t.TempDir(), "r.csv"), file}, ExitRejected, true},
		{"run on its embedded Redis", []string{"run", "--sandbox", "--approval", "required", file}, ExitRejected, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runMain(t, env, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errs)
			}
			if got := strings.Contains(errs, line); got != tc.checked {
				t.Fatalf("checked %v, want %v:\n%s", got, tc.checked, errs)
			}
		})
	}
}

// TestReadHashLimitsRefused: a Redis that refuses CONFIG GET (here
// miniredis, which has no CONFIG) gives an error, hence the info line.
func TestReadHashLimitsRefused(t *testing.T) {
	h, err := readHashLimits(context.Background(), fakeredis.Working(t))
	if err == nil {
		t.Fatalf("CONFIG GET answered on miniredis: %+v", h)
	}
	if level, _ := h.advice(err); level != zerolog.InfoLevel {
		t.Fatalf("level %v, want info", level)
	}
}
