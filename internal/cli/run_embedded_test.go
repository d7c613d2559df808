package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
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
		if tc.warn && !strings.Contains(got, "payout run --redis redis://127.0.0.1:6379/0 --data-key-file data.key "+shellQuote(p)) {
			t.Errorf("the warning shows no command line for a real Redis: %q", got)
		}
		if tc.warn && !strings.Contains(got, "(umask 077; payout keygen > data.key)") {
			t.Errorf("the warning does not make the key file private: %q", got)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/var/spool/payout/nov.csv", "/var/spool/payout/nov.csv"},
		{"", "''"},
		{"my payouts.csv", "'my payouts.csv'"},
		{"it's.csv", `'it'\''s.csv'`},
		{"a;rm -rf x", "'a;rm -rf x'"},
		{"$(id).csv", "'$(id).csv'"},
		{"-x.csv", "./-x.csv"},
		{"--data-key-file x", "'./--data-key-file x'"},
	} {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestTuneEmbeddedGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"default", nil, embeddedGCPercent},
		{"GOGC set", map[string]string{"GOGC": "200"}, 100},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := debug.SetGCPercent(100)
			defer debug.SetGCPercent(old)
			restore := tuneEmbeddedGC(func(k string) string { return tc.env[k] })
			if got := debug.SetGCPercent(tc.want); got != tc.want {
				t.Errorf("GC percent %d, want %d", got, tc.want)
			}
			restore()
			if got := debug.SetGCPercent(100); got != 100 {
				t.Errorf("after restore: GC percent %d, want 100", got)
			}
		})
	}
}

func TestDropCompleted(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range []string{jobs.Queue, notify.Queue} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID("x"), asynq.Retention(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{jobs.Queue: 1, notify.Queue: 1},
		LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	completed := func(q string) int {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			return -1
		}
		return info.Completed
	}
	poll := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	poll("both tasks completed", func() bool { return completed(jobs.Queue) == 1 && completed(notify.Queue) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go dropCompleted(ctx, rdb, 10*time.Millisecond, zerolog.Nop())
	poll("the payout queue's completed task deleted", func() bool { return completed(jobs.Queue) == 0 })
	if n := completed(notify.Queue); n != 1 {
		t.Errorf("notifications: %d completed tasks, want 1 (kept)", n)
	}
}
