package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// fakeClock is Redis's clock (miniredis's TIME): the scripts decide on it.
type fakeClock struct {
	m *miniredis.Miniredis
	t time.Time
}

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d); c.m.SetTime(c.t) }

func newTestLedger(t *testing.T, opts ...Option) (*Ledger, *fakeClock) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	clk := &fakeClock{m: m, t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	m.SetTime(clk.t)
	return New(rdb, append([]Option{WithClock(clk.now)}, opts...)...), clk
}

func seed(t *testing.T, l *Ledger, batch string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, Batch{ID: batch, File: "f.csv", LoadedAt: time.Now(), Rows: int64(n), Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []NewPayout
	for i := 1; i <= n; i++ {
		ps = append(ps, NewPayout{Line: i + 1, ExternalID: fmt.Sprintf("E%d", i), Amount: money.MustParse("10.25"), Destination: "card 411111******1111", Sealed: "sealed"})
	}
	added, err := l.Register(ctx, batch, ps, 2)
	if err != nil || added != n {
		t.Fatalf("Register = %d, %v", added, err)
	}
	if err := l.FinishBatch(ctx, batch); err != nil { // loaded: creates may begin
		t.Fatal(err)
	}
}

func mustState(t *testing.T, l *Ledger, batch, ext string, want lifecycle.State) Payout {
	t.Helper()
	p, err := l.Get(context.Background(), batch, ext)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != want {
		t.Fatalf("%s is %s, want %s (error %q)", ext, p.State, want, p.Error)
	}
	return p
}

func TestRegisterIsIdempotentAndCounts(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	seed(t, l, "b1", 3)
	added, err := l.Register(ctx, "b1", []NewPayout{{Line: 2, ExternalID: "E1", Amount: money.MustParse("10.25")}}, 2)
	if err != nil || added != 0 {
		t.Fatalf("re-register added %d, %v", added, err)
	}
	c, err := l.counts(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Rows[lifecycle.Queued] != 3 || c.Units[lifecycle.Queued] != 3075 {
		t.Fatalf("counts = %+v", c)
	}
	if got := c.Amount(lifecycle.Queued, 2).String(); got != "30.75" {
		t.Fatalf("queued amount %s", got)
	}
	var lines []int
	if err := l.each(ctx, "b1", func(p Payout) error { lines = append(lines, p.Line); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lines) != "[2 3 4]" {
		t.Fatalf("lines %v", lines)
	}
}

func TestClaimAndRelease(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	if lost, err := l.Claims().Claim(ctx, "b1", []string{"A", "B"}); err != nil || len(lost) != 0 {
		t.Fatalf("claim: %v %v", lost, err)
	}
	if lost, _ := l.Claims().Claim(ctx, "b1", []string{"A"}); len(lost) != 0 {
		t.Fatalf("reclaim by the same batch lost %v", lost)
	}
	lost, err := l.Claims().Claim(ctx, "b2", []string{"B", "C"})
	if err != nil || lost["B"] != "b1" || len(lost) != 1 {
		t.Fatalf("claim by b2: %v %v", lost, err)
	}
	owners, _ := l.Claims().Owners(ctx, "b2", []string{"A", "C", "Z"})
	if len(owners) != 1 || owners["A"] != "b1" {
		t.Fatalf("owners %v", owners)
	}
	if err := l.Claims().release(ctx, "b2", []string{"A", "C"}); err != nil {
		t.Fatal(err)
	}
	owners, _ = l.Claims().Owners(ctx, "b3", []string{"A", "C"})
	if owners["A"] != "b1" || owners["C"] != "" {
		t.Fatalf("release of b2 touched b1's claim or kept its own: %v", owners)
	}
}

func TestCreateTransitions(t *testing.T) {
	tests := []struct {
		name      string
		result    decide.CreateResult
		wantState lifecycle.State
		wantSeq   int
		creates   int
	}{
		{"created", decide.CreateResult{To: lifecycle.Created, OrderID: "WD-1", PSPStatus: "Created"}, lifecycle.Created, 0, 1},
		{"rejected", decide.CreateResult{To: lifecycle.Rejected, Error: "declined"}, lifecycle.Rejected, 0, 1},
		{"ambiguous", decide.CreateResult{To: lifecycle.Checking, Error: "HTTP 502"}, lifecycle.Checking, 1, 1},
		{"not sent", decide.CreateResult{To: lifecycle.Queued, Error: "dial"}, lifecycle.Queued, 0, 0},
		{"gave up", decide.CreateResult{To: lifecycle.NeedsReview, Error: "unreachable"}, lifecycle.NeedsReview, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLedger(t)
			ctx := context.Background()
			seed(t, l, "b", 1)
			b, err := l.BeginCreate(ctx, "b", "E1", 1)
			if err != nil || b.Action != decide.Proceed || b.Payout.State != lifecycle.Submitting || b.Payout.Sealed != "sealed" {
				t.Fatalf("BeginCreate = %+v, %v", b, err)
			}
			fin, err := l.FinishCreate(ctx, "b", "E1", 1, tt.result)
			if err != nil || fin.Seq != tt.wantSeq || fin.State != tt.wantState {
				t.Fatalf("FinishCreate = %+v, %v", fin, err)
			}
			p := mustState(t, l, "b", "E1", tt.wantState)
			if p.Creates != tt.creates {
				t.Errorf("creates = %d, want %d", p.Creates, tt.creates)
			}
			c, _ := l.counts(ctx, "b")
			if c.Rows[tt.wantState] != 1 || c.Total() != 1 || c.Units[tt.wantState] != 1025 {
				t.Errorf("counts %+v", c)
			}
			// A second finish of the same attempt never moves it again.
			if tt.wantState != lifecycle.Queued {
				if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued}); !errors.Is(err, ErrConflict) {
					t.Errorf("second finish: %v, want conflict", err)
				}
			}
		})
	}
}

func TestRedeliveryNeverSendsTwice(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	seed(t, l, "b", 1)
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Proceed {
		t.Fatalf("first delivery: %v", b.Action)
	}
	// The worker died mid-request; the task is delivered again.
	b, err := l.BeginCreate(ctx, "b", "E1", 1)
	if err != nil || b.Action != decide.CheckNow || b.Seq != 1 || b.Payout.State != lifecycle.Checking {
		t.Fatalf("redelivery = %+v, %v", b, err)
	}
	// And again: still no create, the status check is ensured.
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.EnsureStatus || b.Seq != 1 {
		t.Fatalf("third delivery = %+v", b)
	}
	// The first worker's late 200 still wins over checking.
	if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-9"}); err != nil {
		t.Fatal(err)
	}
	mustState(t, l, "b", "E1", lifecycle.Created)
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Skip {
		t.Fatalf("after created: %v", b.Action)
	}
	// A stale attempt number never proceeds.
	if b, _ := l.BeginCreate(ctx, "b", "E1", 2); b.Action != decide.Skip {
		t.Fatalf("stale attempt: %v", b.Action)
	}
}

func TestLateAmbiguousAfterCheckingIsAConflict(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	seed(t, l, "b", 1)
	l.BeginCreate(ctx, "b", "E1", 1)
	l.BeginCreate(ctx, "b", "E1", 1) // -> checking by a second delivery
	for _, to := range []lifecycle.State{lifecycle.Checking, lifecycle.Queued, lifecycle.NeedsReview} {
		if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: to}); !errors.Is(err, ErrConflict) {
			t.Errorf("finish to %s from checking: %v, want conflict", to, err)
		}
	}
	mustState(t, l, "b", "E1", lifecycle.Checking)
}

// checkingLedger is a ledger whose payout E1 of batch b is checking,
// status check 1 due, after create attempt 1.
func checkingLedger(t *testing.T) (*Ledger, *fakeClock) {
	t.Helper()
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 1)
	l.BeginCreate(ctx, "b", "E1", 1)
	if fin, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking}); err != nil || fin.Seq != 1 {
		t.Fatalf("to checking: %+v %v", fin, err)
	}
	return l, clk
}

func TestStatusChecks(t *testing.T) {
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
	ctx := context.Background()
	t.Run("found", func(t *testing.T) {
		l, _ := checkingLedger(t)
		s, err := recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1", PSPStatus: "Created"}, policy)
		if err != nil || s.Action != decide.CheckDone {
			t.Fatalf("%+v %v", s, err)
		}
		p := mustState(t, l, "b", "E1", lifecycle.Created)
		if p.OrderID != "WD-1" {
			t.Fatalf("order %q", p.OrderID)
		}
	})
	t.Run("absence needs K misses D apart, then one recreate, then review", func(t *testing.T) {
		l, clk := checkingLedger(t)
		s, _ := recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Missing}, policy)
		if s.Action != decide.CheckAgain || s.Seq != 2 || s.Wait != time.Minute {
			t.Fatalf("first miss: %+v", s)
		}
		clk.add(10 * time.Second) // too soon (Redis time): records nothing
		s, _ = recordCheck(ctx, l, "b", "E1", 2, decide.CheckAnswer{Outcome: decide.Missing}, policy)
		if s.Action != decide.CheckEarly || s.Seq != 2 || s.Wait != 50*time.Second {
			t.Fatalf("early miss: %+v", s)
		}
		clk.add(50 * time.Second)
		s, _ = recordCheck(ctx, l, "b", "E1", 2, decide.CheckAnswer{Outcome: decide.Missing}, policy)
		if s.Action != decide.CheckRecreate || s.Attempt != 2 {
			t.Fatalf("second miss: %+v", s)
		}
		mustState(t, l, "b", "E1", lifecycle.Queued)
		// A stale status task of the old episode does nothing.
		if s, _ := recordCheck(ctx, l, "b", "E1", 3, decide.CheckAnswer{Outcome: decide.Found}, policy); s.Action != decide.CheckSkip {
			t.Fatalf("stale check after recreate: %+v", s)
		}
		// The stale create attempt 1 cannot proceed; attempt 2 can.
		if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Skip {
			t.Fatalf("old attempt: %v", b.Action)
		}
		if b, _ := l.BeginCreate(ctx, "b", "E1", 2); b.Action != decide.Proceed {
			t.Fatalf("attempt 2: %v", b.Action)
		}
		fin, _ := l.FinishCreate(ctx, "b", "E1", 2, decide.CreateResult{To: lifecycle.Checking})
		s, _ = recordCheck(ctx, l, "b", "E1", fin.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
		clk.add(time.Minute)
		s, _ = recordCheck(ctx, l, "b", "E1", s.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
		if s.Action != decide.CheckReview {
			t.Fatalf("after M creates: %+v", s)
		}
		mustState(t, l, "b", "E1", lifecycle.NeedsReview)
	})
	t.Run("faults end in review after N", func(t *testing.T) {
		l, clk := checkingLedger(t)
		seq := 1
		for i := 1; i < policy.MaxFaults; i++ {
			s, _ := recordCheck(ctx, l, "b", "E1", seq, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 503"}, policy)
			if s.Action != decide.CheckAgain || s.Faults != i || s.Wait != time.Second<<(i-1) {
				t.Fatalf("fault %d: %+v", i, s)
			}
			// Early (Redis time): counts nothing.
			if e, _ := recordCheck(ctx, l, "b", "E1", s.Seq, decide.CheckAnswer{Outcome: decide.NoAnswer}, policy); e.Action != decide.CheckEarly {
				t.Fatalf("early check after fault %d: %+v", i, e)
			}
			clk.add(s.Wait)
			seq = s.Seq
		}
		s, _ := recordCheck(ctx, l, "b", "E1", seq, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 503"}, policy)
		if s.Action != decide.CheckReview {
			t.Fatalf("last fault: %+v", s)
		}
		p := mustState(t, l, "b", "E1", lifecycle.NeedsReview)
		if p.Error == "" {
			t.Fatal("no reason recorded")
		}
	})
	t.Run("stale seq", func(t *testing.T) {
		l, _ := checkingLedger(t)
		s, _ := recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.NoAnswer}, policy)
		s2, _ := recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Found}, policy)
		if s2.Action != decide.CheckStale || s2.Seq != s.Seq {
			t.Fatalf("stale: %+v", s2)
		}
		mustState(t, l, "b", "E1", lifecycle.Checking)
	})
}

func TestBatchAndCounts(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	seed(t, l, "b1", 2)
	if _, created, _ := l.BeginBatch(ctx, Batch{ID: "b1"}); created {
		t.Fatal("BeginBatch of an existing batch created it again")
	}
	if err := l.FinishBatch(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	b, err := l.Batch(ctx, "b1")
	c, _ := l.counts(ctx, "b1")
	if err != nil || b.Phase != lifecycle.PhaseLoaded || c.Rows[lifecycle.Queued] != 2 || b.File != "f.csv" {
		t.Fatalf("Batch = %+v, %v; counts %+v", b, err, c)
	}
	if _, err := l.Batch(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown batch: %v", err)
	}
}

// BenchmarkTransition runs a create's two transitions (BeginCreate,
// FinishCreate to created) on miniredis: the Go side of a transition.
func BenchmarkTransition(b *testing.B) {
	m := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	l := New(rdb)
	seedLoaded(b, l, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	runCreates(b, l)
}

// seedLoaded registers payouts E0..E(n-1) (a card each) in batch b and
// marks it loaded, so that their creates may begin.
func seedLoaded(b *testing.B, l *Ledger, n int) {
	b.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: int64(n), Total: money.MustParse("1"), Scale: 2}); err != nil {
		b.Fatal(err)
	}
	ps := make([]NewPayout, n)
	for i := range ps {
		ps[i] = NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("E%d", i), Amount: money.MustParse("1.00"),
			Destination: "411111******1111", Sealed: "v1:0123456789abcdef0123456789abcdef0123456789abcdef"}
	}
	for i := 0; i < len(ps); i += 1000 {
		if _, err := l.Register(ctx, "b", ps[i:min(i+1000, len(ps))], 2); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		b.Fatal(err)
	}
}

// runCreates begins and finishes (as created) the create of payouts
// E0..E(b.N-1), failing on any other outcome.
func runCreates(b *testing.B, l *Ledger) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ext := fmt.Sprintf("E%d", i)
		if begin, err := l.BeginCreate(ctx, "b", ext, 1); err != nil || begin.Action != decide.Proceed {
			b.Fatalf("begin create of %s: %v, %v", ext, begin.Action, err)
		}
		fin, err := l.FinishCreate(ctx, "b", ext, 1, decide.CreateResult{To: lifecycle.Created, OrderID: "ord-" + ext, PSPStatus: "CREATED", HTTPStatus: 201})
		if err != nil || fin.State != lifecycle.Created {
			b.Fatalf("finish create of %s: %v, %v", ext, fin.State, err)
		}
	}
}

func TestCreateTriesBudget(t *testing.T) {
	l, _ := newTestLedger(t)
	ctx := context.Background()
	seed(t, l, "b", 1)
	for try := 1; try <= 3; try++ {
		b, _ := l.BeginCreate(ctx, "b", "E1", 1)
		if b.Action != decide.Proceed || b.Payout.Tries != try-1 {
			t.Fatalf("try %d: %v, %d tries read", try, b.Action, b.Payout.Tries)
		}
		fin, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "dial tcp: refused", MaxTries: 2, Tries: b.Payout.Tries})
		want := lifecycle.Queued
		if try == 3 {
			want = lifecycle.NeedsReview
		}
		if err != nil || fin.State != want {
			t.Fatalf("try %d: %+v %v, want %s", try, fin, err, want)
		}
	}
	p := mustState(t, l, "b", "E1", lifecycle.NeedsReview)
	if !strings.Contains(p.Error, "3 tries") {
		t.Fatalf("reason %q", p.Error)
	}
}

// TestRegisterInCalls: a registration larger than one script call is
// several calls in one round trip; together they store every payout once,
// with exact counters and the line index in line order, whether the sum
// is counted once (all new) or per payout (a rerun that finds some stored).
func TestRegisterInCalls(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	var ps []NewPayout
	var units int64
	for i := range 2*registerCall + 50 {
		a := money.FromMinor(int64(100+i*7919%100_000), 2)
		units += a.Minor(2)
		ps = append(ps, NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("E%04d", i), Amount: a, Destination: "telecom MTS", Telecom: "MTS"})
	}
	half := len(ps) / 2
	if n, err := l.Register(ctx, "b", ps[:half], 2); err != nil || n != half {
		t.Fatalf("first half: %d %v", n, err)
	}
	// The rerun of a load that died half way: all of it again.
	if n, err := l.Register(ctx, "b", ps, 2); err != nil || n != len(ps)-half {
		t.Fatalf("rerun: %d %v, want %d", n, err, len(ps)-half)
	}
	if n, err := l.Register(ctx, "b", ps, 2); err != nil || n != 0 {
		t.Fatalf("third run: %d %v", n, err)
	}
	c, err := l.counts(ctx, "b")
	if err != nil || c.Rows[lifecycle.Queued] != int64(len(ps)) || c.Units[lifecycle.Queued] != units {
		t.Fatalf("counts %v %v, want %d rows, %d units", c, err, len(ps), units)
	}
	var lines []int
	if err := l.each(ctx, "b", func(p Payout) error { lines = append(lines, p.Line); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(ps) || !slices.IsSorted(lines) {
		t.Fatalf("Each gave %d lines, sorted %v; want %d in order", len(lines), slices.IsSorted(lines), len(ps))
	}
}

// TestRegisterWithoutTheCachedScript: a Redis that lost its script cache
// (restarted) still registers every call of a pipelined registration.
func TestRegisterWithoutTheCachedScript(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	var ps []NewPayout
	for i := range registerCall + 1 {
		ps = append(ps, NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("E%04d", i), Amount: money.MustParse("1"), Destination: "telecom MTS", Telecom: "MTS"})
	}
	if err := l.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Register(ctx, "b", ps, 2); err != nil || n != len(ps) {
		t.Fatalf("register: %d %v", n, err)
	}
}

// TestRegisterLockedNeedsTheLoadLock: without the lock, or after another
// loader took it over, RegisterLocked writes nothing.
func TestRegisterLockedNeedsTheLoadLock(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2}); err != nil {
		t.Fatal(err)
	}
	ps := []NewPayout{{Line: 2, ExternalID: "A", Amount: money.MustParse("1")}}
	if _, err := l.RegisterLocked(ctx, "b", "me", ps, 2); !errors.Is(err, ErrLoadLockLost) {
		t.Fatalf("without the lock: %v", err)
	}
	if ok, _ := l.Locks().LockLoad(ctx, "b", "other", time.Minute); !ok {
		t.Fatal("lock not taken")
	}
	if ok, _ := l.Locks().LockLoad(ctx, "b", "me", time.Minute); ok {
		t.Fatal("a held lock was taken twice")
	}
	if _, err := l.RegisterLocked(ctx, "b", "me", ps, 2); !errors.Is(err, ErrLoadLockLost) {
		t.Fatalf("with another's lock: %v", err)
	}
	if ok, _ := l.Locks().RefreshLoad(ctx, "b", "me", time.Minute); ok {
		t.Fatal("refreshed another loader's lock")
	}
	if _, err := l.Get(ctx, "b", "A"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused RegisterLocked wrote the payout: %v", err)
	}
	if err := l.Locks().UnlockLoad(ctx, "b", "me"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := l.Locks().LockLoad(ctx, "b", "me", time.Minute); ok {
		t.Fatal("unlock by a non-owner released the lock")
	}
}

// TestBeginCreateHoldsUntilLoaded: no create begins for a batch that is
// not loaded (a load not completed, awaiting approval, discarded, no
// metadata): the payout stays queued, untouched, and the decision says why.
func TestBeginCreateHoldsUntilLoaded(t *testing.T) {
	for _, phase := range []string{lifecycle.PhaseLoading, lifecycle.PhaseAwaiting, lifecycle.PhaseDiscarded, ""} {
		t.Run("phase "+phase, func(t *testing.T) {
			l, _ := newTestLedger(t)
			ctx := context.Background()
			seed(t, l, "b", 1)
			if phase == "" {
				l.rdb.Del(ctx, metaKey("b"))
			} else {
				l.rdb.HSet(ctx, metaKey("b"), "phase", phase)
			}
			b, err := l.BeginCreate(ctx, "b", "E1", 1)
			if err != nil || b.Action != decide.Hold || b.Phase != phase {
				t.Fatalf("begin create in phase %q: %+v %v, want hold", phase, b, err)
			}
			p := mustState(t, l, "b", "E1", lifecycle.Queued)
			if p.Creates != 0 {
				t.Fatalf("held begin counted a create: %+v", p)
			}
			c, _ := l.counts(ctx, "b")
			if c.Rows[lifecycle.Queued] != 1 || c.Rows[lifecycle.Submitting] != 0 {
				t.Fatalf("counts %+v", c.Rows)
			}
			l.rdb.HSet(ctx, metaKey("b"), "phase", lifecycle.PhaseLoaded)
			if b, err := l.BeginCreate(ctx, "b", "E1", 1); err != nil || b.Action != decide.Proceed {
				t.Fatalf("begin create once loaded: %+v %v, want proceed", b, err)
			}
		})
	}
}

// TestNextCall: a script call holds a run of payouts of one line chunk,
// at most registerCall of them.
func TestNextCall(t *testing.T) {
	lines := func(ls ...int) []NewPayout {
		ps := make([]NewPayout, len(ls))
		for i, l := range ls {
			ps[i].Line = l
		}
		return ps
	}
	run := func(from, n int) []NewPayout {
		ps := make([]NewPayout, n)
		for i := range ps {
			ps[i].Line = from + i
		}
		return ps
	}
	tests := []struct {
		name string
		ps   []NewPayout
		want int
	}{
		{"one", lines(7), 1},
		{"to the chunk's end", run(2, 300), lineChunk - 2},
		{"a whole chunk", run(lineChunk, 300), registerCall},
		{"a gap in the chunk", lines(2, 5, 9, lineChunk+1), 3},
		{"out of order", lines(lineChunk+1, 2, lineChunk+2), 1},
	}
	for _, tt := range tests {
		if got := nextCall(tt.ps); got != tt.want {
			t.Errorf("%s: nextCall = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// recordCheck reads the payout as a worker does before it asks the PSP
// (Snapshot), then records the answer a to status check seq.
func recordCheck(ctx context.Context, l *Ledger, batch, ext string, seq int, a decide.CheckAnswer, p decide.CheckPolicy) (decide.CheckStep, error) {
	_, s, err := l.Snapshot(ctx, batch, ext)
	if err != nil {
		return decide.CheckStep{}, err
	}
	return l.RecordCheck(ctx, s, seq, a, p)
}

func mustSnapshot(t *testing.T, l *Ledger, batch, ext string) decide.Snapshot {
	t.Helper()
	_, s, err := l.Snapshot(context.Background(), batch, ext)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recordOutcome reads the payout as a worker does before it asks the PSP
// (Snapshot), then records verdict v of outcome check oseq.
func recordOutcome(ctx context.Context, l *Ledger, batch, ext string, oseq int, v decide.Verdict, status, reason string, http int) (decide.OutcomeStep, error) {
	_, s, err := l.Snapshot(ctx, batch, ext)
	if err != nil {
		return decide.OutcomeStep{}, err
	}
	return l.RecordOutcome(ctx, s, oseq, decide.OutcomeAnswer{Verdict: v, PSPStatus: status, Reason: reason, HTTPStatus: http})
}
