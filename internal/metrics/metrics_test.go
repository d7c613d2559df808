package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// fixture: batch A (scale 2) with 3 payouts, one checking and one needing
// review; batch B awaiting approval with 2; batch C all final.
func fixture(t *testing.T) (*ledger.Ledger, *miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(t0)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	clock := t0
	l := ledger.New(rdb, ledger.WithClock(func() time.Time { return clock }))
	ctx := context.Background()
	load := func(id string, amounts ...string) {
		if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: id, File: id + ".csv", LoadedAt: clock, Scale: 2}); err != nil {
			t.Fatal(err)
		}
		var ps []ledger.NewPayout
		for i, a := range amounts {
			ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: id + string(rune('1'+i)), Amount: money.MustParse(a), Destination: "card 411111******1111", Sealed: "s"})
		}
		if _, err := l.Register(ctx, id, ps, 2); err != nil {
			t.Fatal(err)
		}
	}
	step := func(d time.Duration) { clock = clock.Add(d); m.SetTime(clock) }
	load("A", "10.50", "20.25", "5.00")
	if err := l.FinishBatch(ctx, "A"); err != nil { // as the loader does, before any task
		t.Fatal(err)
	}
	step(time.Minute)
	for _, ext := range []string{"A1", "A2"} {
		if _, err := l.BeginCreate(ctx, "A", ext, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, "A", ext, 1, decide.CreateResult{To: lifecycle.Checking, Error: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	step(time.Minute)
	if _, err := l.Cancel(ctx, "A", "A3", "alice", "dup"); err != nil {
		t.Fatal(err)
	}
	step(10 * time.Minute)
	load("B", "100", "0.01")
	if err := l.Controls().HoldBatch(ctx, "B", "approval required"); err != nil {
		t.Fatal(err)
	}
	step(5 * time.Minute)
	return l, m, rdb
}

func TestComputeSumsExactlyAndAgesFromEntering(t *testing.T) {
	l, _, _ := fixture(t)
	s, err := Compute(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if !s.At.Equal(t0.Add(17 * time.Minute)) {
		t.Errorf("At = %v", s.At)
	}
	ck := s.States[lifecycle.Checking]
	if ck.Payouts != 2 || ck.Amount.String() != "30.75" || !ck.Oldest.Equal(t0.Add(time.Minute)) {
		t.Errorf("checking = %+v, want 2 payouts, 30.75, oldest %v", ck, t0.Add(time.Minute))
	}
	for _, st := range []lifecycle.State{lifecycle.Queued, lifecycle.Submitting, ledger.AwaitingOutcome, lifecycle.NeedsReview} {
		if f := s.States[st]; f.Payouts != 0 || !f.Oldest.IsZero() {
			t.Errorf("%s = %+v, want none", st, f)
		}
	}
	if s.ApprovalBatches != 1 || s.Approval.Payouts != 2 || s.Approval.Amount.String() != "100.01" || !s.Approval.Oldest.Equal(t0.Add(12*time.Minute)) {
		t.Errorf("approval = %d batches, %+v", s.ApprovalBatches, s.Approval)
	}
	// Stored and read back exactly.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeSnapshot(b)
	if err != nil || back.Approval.Amount.String() != "100.01" || !back.States[lifecycle.Checking].Oldest.Equal(ck.Oldest) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestCollectorExportsTheStoredSnapshot(t *testing.T) {
	l, m, rdb := fixture(t)
	ctx := context.Background()
	p := Publisher{Redis: rdb, Ledger: l, Interval: time.Minute}
	c := NewCollector(rdb)
	// Before any publisher ran: Redis figures only, no ledger gauges.
	if n := testutil.CollectAndCount(c, "payout_open_payouts"); n != 0 {
		t.Errorf("%d open series before a snapshot, want 0", n)
	}
	if err := p.Once(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	// The lease holds off a second publisher for the interval.
	if err := rdb.Del(ctx, keys.MetricsSnapshot()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Once(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, keys.MetricsSnapshot()).Result(); n != 0 {
		t.Fatal("a second process computed the snapshot while the first held the lease")
	}
	if err := p.Once(ctx, "w1"); err != nil { // same owner: SETNX still refuses until the lease expires
		t.Fatal(err)
	}
	m.FastForward(time.Minute)
	if err := p.Once(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0.Add(77 * time.Minute)) // an hour after the snapshot: ages grow between snapshots
	want := `
# HELP payout_open_oldest_age_seconds Seconds since the oldest open payout in the state entered it (absent: none).
# TYPE payout_open_oldest_age_seconds gauge
payout_open_oldest_age_seconds{state="checking"} 4560
# HELP payout_awaiting_approval_amount Sum of the amounts of the batches awaiting approval.
# TYPE payout_awaiting_approval_amount gauge
payout_awaiting_approval_amount 100.01
# HELP payout_open_payouts Open payouts by state (queued, submitting, checking, awaiting_outcome), batches awaiting approval excluded.
# TYPE payout_open_payouts gauge
payout_open_payouts{state="awaiting_outcome"} 0
payout_open_payouts{state="checking"} 2
payout_open_payouts{state="queued"} 0
payout_open_payouts{state="scheduled"} 0
payout_open_payouts{state="submitting"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "payout_open_oldest_age_seconds", "payout_awaiting_approval_amount", "payout_open_payouts"); err != nil {
		t.Error(err)
	}
	// A snapshot past its lifetime (3 intervals) is gone: nothing stale is exported.
	m.FastForward(3 * time.Minute)
	if n := testutil.CollectAndCount(c, "payout_open_payouts"); n != 0 {
		t.Errorf("%d open series after the snapshot expired, want 0", n)
	}
}

func TestMemoryReadsInfo(t *testing.T) {
	used, max := memory("# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:4194304\r\nmaxmemory_policy:noeviction\r\n")
	if used != 1048576 || max != 4194304 {
		t.Errorf("memory = %v, %v", used, max)
	}
}

func TestWriteLoaderRunKeepsTheOtherResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payout_loader.prom")
	end := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	runs := []LoaderRun{
		{OK: true, Finished: end, Duration: 1500 * time.Millisecond, Files: 2, Refused: 1, Rows: 120},
		{OK: false, Finished: end.Add(time.Minute), Duration: 200 * time.Millisecond},
	}
	for _, r := range runs {
		if err := WriteLoaderRun(path, r); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, line := range []string{
		`payout_loader_last_run_timestamp_seconds{result="success"} 1.7953992e+09`,
		`payout_loader_last_run_timestamp_seconds{result="failure"} 1.79539926e+09`,
		`payout_loader_last_run_rows{result="success"} 120`,
		`payout_loader_last_run_refused_files{result="success"} 1`,
		`payout_loader_last_run_files{result="failure"} 0`,
		`payout_loader_last_run_duration_seconds{result="success"} 1.5`,
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("textfile lacks %q:\n%s", line, got)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, %v", fi.Mode(), err)
	}
	// An unreadable file is not overwritten: the other result's figures
	// would be lost without a word.
	if err := os.WriteFile(path, []byte("not { metrics\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLoaderRun(path, runs[0]); err == nil {
		t.Error("WriteLoaderRun over a broken file: no error")
	}
}

// TestScheduledGauge: payout_scheduled_payouts counts the payouts waiting
// for their release time across batches, those of a batch awaiting
// approval included, with no label.
func TestScheduledGauge(t *testing.T) {
	l, _, rdb := fixture(t)
	ctx := context.Background()
	schedule := func(id string, n int, hold bool) {
		if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: id, File: id + ".csv", LoadedAt: t0, Scale: 2}); err != nil {
			t.Fatal(err)
		}
		var (
			ps  []ledger.NewPayout
			due []ledger.Scheduled
		)
		for i := range n + 1 { // one more, left queued
			ext := id + string(rune('1'+i))
			ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("1.00"), Destination: "card 411111******1111", Sealed: "s"})
			if i < n {
				due = append(due, ledger.Scheduled{ExternalID: ext, At: t0.Add(48 * time.Hour)})
			}
		}
		if _, err := l.Register(ctx, id, ps, 2); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Schedule().PutLocked(ctx, id, "", due); err != nil || got != n {
			t.Fatalf("schedule %s: %d %v", id, got, err)
		}
		if hold {
			if err := l.Controls().HoldBatch(ctx, id, "approval required"); err != nil {
				t.Fatal(err)
			}
		} else if err := l.FinishBatch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	schedule("S", 3, false)
	schedule("W", 2, true)
	if err := (Publisher{Redis: rdb, Ledger: l, Interval: time.Minute}).Once(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP payout_scheduled_payouts Payouts waiting for their release time (state scheduled), those of batches awaiting approval included.
# TYPE payout_scheduled_payouts gauge
payout_scheduled_payouts 5
`
	if err := testutil.CollectAndCompare(NewCollector(rdb), strings.NewReader(want), "payout_scheduled_payouts"); err != nil {
		t.Error(err)
	}
}
