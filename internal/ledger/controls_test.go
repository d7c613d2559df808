package ledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

func awaitingBatch(t *testing.T, l *Ledger, id, by string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, Batch{ID: id, File: id + ".csv", LoadedAt: time.Now(), Rows: int64(n), Total: money.MustParse("100.00"), Scale: 2, LoadedBy: by}); err != nil {
		t.Fatal(err)
	}
	seedRows(t, l, id, n)
	if err := l.Controls().HoldBatch(ctx, id, "approval required"); err != nil {
		t.Fatal(err)
	}
}

func seedRows(t *testing.T, l *Ledger, batch string, n int) {
	t.Helper()
	var ps []NewPayout
	for i := 1; i <= n; i++ {
		ps = append(ps, NewPayout{Line: i + 1, ExternalID: batch + "-" + string(rune('A'+i-1)), Amount: money.MustParse("10.00"), Destination: "card 411111******1111"})
	}
	if _, err := l.Register(context.Background(), batch, ps, 2); err != nil {
		t.Fatal(err)
	}
}

func TestApproval(t *testing.T) {
	ctx := context.Background()
	t.Run("four eyes", func(t *testing.T) {
		l, _ := newTestLedger(t)
		awaitingBatch(t, l, "b", "alice", 2)
		for _, by := range []string{"alice", "Alice", " ALICE "} {
			if _, err := l.Controls().Approve(ctx, "b", Approval{By: by, FourEyes: true}); !errors.Is(err, ErrFourEyes) {
				t.Fatalf("approval by the loader as %q: %v", by, err)
			}
		}
		b, err := l.Controls().Approve(ctx, "b", Approval{By: "bob", FourEyes: true})
		if err != nil || b.Phase != lifecycle.PhaseLoaded || b.DecidedBy != "bob" {
			t.Fatalf("approval by another: %+v %v", b, err)
		}
		if _, err := l.Controls().Approve(ctx, "b", Approval{By: "bob"}); !errors.Is(err, ErrNotAwaiting) {
			t.Fatalf("second approval: %v", err)
		}
	})
	t.Run("the approver's note is checked, scrubbed and audited", func(t *testing.T) {
		l, _ := newTestLedger(t)
		awaitingBatch(t, l, "n", "alice", 1)
		for _, bad := range []string{"two\nlines", strings.Repeat("x", 1001)} {
			if _, err := l.Controls().Approve(ctx, "n", Approval{By: "bob", Note: bad}); !errors.Is(err, ErrBadResolution) {
				t.Fatalf("note %q: %v", bad[:min(10, len(bad))], err)
			}
		}
		if b, _ := l.Batch(ctx, "n"); b.Phase != lifecycle.PhaseAwaiting {
			t.Fatalf("a refused note approved the batch: %s", b.Phase)
		}
		b, err := l.Controls().Approve(ctx, "n", Approval{By: "bob", Note: " checked against invoice 4111 1111 1111 1111 "})
		if err != nil || b.Note != "approved: checked against invoice 411111******1111" {
			t.Fatalf("approval with a note: %q %v", b.Note, err)
		}
		var notes []string
		if err := l.Audit().Each(ctx, "n", "", func(a AuditEntry) error {
			if a.From == lifecycle.PhaseAwaiting {
				notes = append(notes, a.Context["note"])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(notes) != 1 || notes[0] != b.Note {
			t.Fatalf("audit of the approval: %q", notes)
		}
	})
	t.Run("four eyes recorded on the batch binds whatever the approver asks", func(t *testing.T) {
		l, _ := newTestLedger(t)
		if _, _, err := l.BeginBatch(ctx, Batch{ID: "fe", File: "fe.csv", LoadedAt: time.Now(), Rows: 1, Total: money.MustParse("10.00"),
			Scale: 2, LoadedBy: "alice", FourEyes: true}); err != nil {
			t.Fatal(err)
		}
		seedRows(t, l, "fe", 1)
		if err := l.Controls().HoldBatch(ctx, "fe", "approval required"); err != nil {
			t.Fatal(err)
		}
		b, err := l.Batch(ctx, "fe")
		if err != nil || !b.FourEyes || b.LoadedBy != "alice" {
			t.Fatalf("batch record: %+v %v", b, err)
		}
		for _, a := range []Approval{{By: "alice"}, {By: "ALICE", FourEyes: false}, {By: "alice", FourEyes: true}} {
			if _, err := l.Controls().Approve(ctx, "fe", a); !errors.Is(err, ErrFourEyes) {
				t.Fatalf("approval %+v by the loader: %v", a, err)
			}
			if err := b.mayApprove(a.By, a.FourEyes); !errors.Is(err, ErrFourEyes) {
				t.Fatalf("mayApprove(%q): %v", a.By, err)
			}
		}
		if err := b.mayApprove("bob", false); err != nil {
			t.Fatalf("mayApprove(bob): %v", err)
		}
		if b, err := l.Controls().Approve(ctx, "fe", Approval{By: "bob"}); err != nil || b.Phase != lifecycle.PhaseLoaded {
			t.Fatalf("approval by bob: %+v %v", b, err)
		}
	})
	t.Run("four eyes without a recorded loader refuses everyone", func(t *testing.T) {
		b := Batch{ID: "x", FourEyes: true}
		if err := b.mayApprove("bob", false); !errors.Is(err, ErrFourEyes) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a batch recorded before the policy follows the approver's policy", func(t *testing.T) {
		l, _ := newTestLedger(t)
		rdb := l.rdb
		awaitingBatch(t, l, "old", "alice", 1)
		// As written before the field existed.
		if err := rdb.HDel(ctx, metaKey("old"), "fe").Err(); err != nil {
			t.Fatal(err)
		}
		if b, _ := l.Batch(ctx, "old"); b.FourEyes {
			t.Fatal("a batch without the field reads as four-eyes")
		}
		if _, err := l.Controls().Approve(ctx, "old", Approval{By: "alice", FourEyes: true}); !errors.Is(err, ErrFourEyes) {
			t.Fatalf("deployment policy on an old batch: %v", err)
		}
		if _, err := l.Controls().Approve(ctx, "old", Approval{By: "alice"}); err != nil {
			t.Fatalf("without the policy the old batch's loader may approve (as before): %v", err)
		}
	})
	t.Run("discard cancels every queued payout and nothing can approve it after", func(t *testing.T) {
		l, _ := newTestLedger(t)
		awaitingBatch(t, l, "b", "alice", 3)
		n, err := l.Controls().Discard(ctx, "b", "carol", "wrong file")
		if err != nil || n != 3 {
			t.Fatalf("discard: %d %v", n, err)
		}
		c, _ := l.counts(ctx, "b")
		if c.Rows[lifecycle.Cancelled] != 3 || c.Units[lifecycle.Cancelled] != 3000 || c.Open() != 0 {
			t.Fatalf("counts %+v", c)
		}
		if _, err := l.Controls().Approve(ctx, "b", Approval{By: "bob"}); !errors.Is(err, ErrNotAwaiting) {
			t.Fatalf("approve after discard: %v", err)
		}
	})
	t.Run("daily limit is atomic across approvers", func(t *testing.T) {
		l, _ := newTestLedger(t)
		// Ten batches of 100.00 against a limit of 550.00: exactly five pass.
		ids := []string{"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"}
		for _, id := range ids {
			awaitingBatch(t, l, id, "alice", 1)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		passed, limited := 0, 0
		for _, id := range ids {
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				_, err := l.Controls().Approve(ctx, id, Approval{By: "bob", DailyLimit: money.MustParse("550.00")})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					passed++
				case errors.Is(err, ErrDailyLimit):
					limited++
				default:
					t.Error(err)
				}
			}(id)
		}
		wg.Wait()
		if passed != 5 || limited != 5 {
			t.Fatalf("passed %d, limited %d; want 5 and 5", passed, limited)
		}
	})
}

// TestCancelRacesTheWorker: cancel and begin-create are both
// compare-and-set from queued: whichever comes first wins, and a cancelled
// payout is never sent.
func TestCancelRacesTheWorker(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 2)
	if was, err := l.Cancel(ctx, "b", "E1", "carol", "duplicate row"); err != nil || was != lifecycle.Queued {
		t.Fatalf("cancel: %s %v", was, err)
	}
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Skip {
		t.Fatalf("worker after cancel: %v", b.Action)
	}
	mustState(t, l, "b", "E1", lifecycle.Cancelled)
	if b, _ := l.BeginCreate(ctx, "b", "E2", 1); b.Action != decide.Proceed {
		t.Fatalf("begin: %v", b.Action)
	}
	if was, err := l.Cancel(ctx, "b", "E2", "carol", "too late"); err != nil || was != lifecycle.Submitting {
		t.Fatalf("cancel of a submitting payout: %s %v", was, err)
	}
	mustState(t, l, "b", "E2", lifecycle.Submitting)
	if _, err := l.Cancel(ctx, "b", "E2", "", ""); !errors.Is(err, ErrBadResolution) {
		t.Fatalf("cancel without operator: %v", err)
	}
}

// TestCancelRefusesAPayoutEverSent: a payout whose absence was confirmed
// after an ambiguous create is queued again, but its first order may yet
// be paid (a PSP lagging past (K-1) x D): cancel refuses it with
// ErrEverSent and writes nothing (issue 38: it was cancelled as "not
// sent"); discard's cancel of the batch's queued payouts passes over it.
func TestCancelRefusesAPayoutEverSent(t *testing.T) {
	ctx := context.Background()
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 3, MaxFaults: 3}
	l, clk := checkingLedger(t)
	if s, _ := recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Missing}, policy); s.Action != decide.CheckAgain {
		t.Fatalf("first miss: %+v", s)
	}
	clk.add(time.Minute)
	if s, _ := recordCheck(ctx, l, "b", "E1", 2, decide.CheckAnswer{Outcome: decide.Missing}, policy); s.Action != decide.CheckRecreate {
		t.Fatalf("second miss: %+v", s)
	}
	before := mustState(t, l, "b", "E1", lifecycle.Queued)
	was, err := l.Cancel(ctx, "b", "E1", "carol", "not needed")
	if !errors.Is(err, ErrEverSent) || !strings.Contains(err.Error(), "cannot be cancelled as never sent") {
		t.Fatalf("cancel of a payout sent before: %s %v", was, err)
	}
	if after := mustState(t, l, "b", "E1", lifecycle.Queued); after.Creates != before.Creates || after.Error != before.Error {
		t.Fatalf("a refused cancel wrote: %+v -> %+v", before, after)
	}
	if n, err := l.cancelQueued(ctx, "b", "carol", "batch discarded"); err != nil || n != 0 {
		t.Fatalf("cancelQueued over a payout sent before: %d %v", n, err)
	}
	mustState(t, l, "b", "E1", lifecycle.Queued)
}

// TestMoneyCannotWrap: a batch total of 16 digits reads back exactly, and
// the day's approved sum refuses what would take it over the ceiling of
// every sum (money.Ceiling(4)) instead of wrapping, so a later batch still
// meets the daily limit (issue 38: two rows of 922337153685477.58 made the
// day's sum drop and let a held batch through).
func TestMoneyCannotWrap(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	huge := money.MustParse("922337153685477.58").Add(money.MustParse("922337153685477.58"))
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "big", File: "big.csv", LoadedAt: time.Now(), Rows: 2, Total: huge, Scale: 2}); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Batch(ctx, "big"); err != nil || b.Total.Cmp(huge) != 0 || b.Total.StringFixed(2) != "1844674307370955.16" {
		t.Fatalf("16-digit total read back as %s (%v)", b.Total.StringFixed(2), err)
	}

	ctl := l.Controls()
	if _, _, err := ctl.ReserveDaily(ctx, money.MustParse("20000000"), money.Amount{}, 2); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		amount money.Amount
		limit  money.Amount
		want   error
	}{
		{"a total beyond int64 at 4 decimals", huge, money.Amount{}, money.ErrCeiling},
		{"one row of 922337153685477.58", money.MustParse("922337153685477.58"), money.Amount{}, money.ErrCeiling},
		{"a limit above the ceiling is the ceiling", money.Ceiling(4), money.MustParse("999999999999999"), money.ErrCeiling},
		{"the held batch still meets the limit", money.MustParse("50000000"), money.MustParse("60000000"), ErrDailyLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ctl.ReserveDaily(ctx, tt.amount, tt.limit, 2); !errors.Is(err, tt.want) {
				t.Fatalf("ReserveDaily(%s, limit %s) = %v, want %v", tt.amount, tt.limit, err, tt.want)
			}
		})
	}
	// Up to the ceiling exactly is counted, one unit more is refused.
	rest := money.Ceiling(4).Decimal().Sub(money.MustParse("20000000").Decimal())
	left := money.MustParse(rest.String())
	if _, _, err := ctl.ReserveDaily(ctx, left, money.Amount{}, 4); err != nil {
		t.Fatalf("reserving up to the ceiling: %v", err)
	}
	if _, _, err := ctl.ReserveDaily(ctx, money.MustParse("0.0001"), money.Amount{}, 4); !errors.Is(err, money.ErrCeiling) ||
		!strings.Contains(err.Error(), "900719925474.0991 to 900719925474.0992") {
		t.Fatalf("one unit over the ceiling: %v", err)
	}
}
