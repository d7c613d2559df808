//go:build integration

package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/view"
)

// killAtHalf makes opts end the load once half the rows are registered.
func killAtHalf(opts Options) Options {
	opts.interrupt = func(pt string, rows int) error {
		if pt == pointRegistered && rows >= interruptRows/2 {
			return errKilled
		}
		return nil
	}
	return opts
}

// writeAmbiguous writes interruptRows rows whose amount 1.500 means 1500
// under comma-dot and 1.5 under plain.
func writeAmbiguous(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fmt.csv")
	var sb strings.Builder
	sb.WriteString("externalId,amount,cardNumber,telecomOperator\n")
	for i := 0; i < interruptRows; i++ {
		fmt.Fprintf(&sb, "FMT-%05d,1.500,,MTS\n", i)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResumeUnderOtherReadingIsRefused: a rerun of an interrupted load
// under options that read its rows otherwise is refused before it claims
// or registers anything, naming the options; rerun with the first run's
// options, it completes with one reading of the file.
func TestResumeUnderOtherReadingIsRefused(t *testing.T) {
	first := Options{ChunkSize: 100, EnqueueWorkers: 4}
	first.File.AmountFormat = money.CommaDot
	cases := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"amount format and decimals", func(o *Options) { o.File.AmountFormat = money.Plain; o.File.Scale = 3 },
			"amount format comma-dot (this run: plain), decimals 2 (this run: 3)"},
		{"partial", func(o *Options) { o.Partial = true }, "partial false (this run: true)"},
		{"max amount", func(o *Options) { o.File.MaxAmount = money.MustParse("100000") }, "max amount none (this run: 100000)"},
		{"card prefixes", func(o *Options) { o.File.CardPrefixes = payfile.CardPrefixesAny }, "card prefixes schemes (this run: any)"},
		{"sheet", func(o *Options) { o.File.Sheet = "Payouts" }, "sheet (the first shown) (this run: Payouts)"},
		{"hidden rows", func(o *Options) { o.File.IncludeHiddenRows = true }, "include hidden rows false (this run: true)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newInterruptEnv(t)
			path := writeAmbiguous(t)
			res, err := e.ld.LoadFile(ctx, path, killAtHalf(first))
			if !errors.Is(err, errKilled) {
				t.Fatalf("first load = %+v, %v", res, err)
			}
			before, err := view.New(e.led.Redis()).Counts(ctx, res.Batch)
			if err != nil {
				t.Fatal(err)
			}
			other := first
			tc.change(&other)
			again, err := e.ld.LoadFile(ctx, path, other)
			if !errors.Is(err, ErrOtherOptions) {
				t.Fatalf("rerun under other options = %+v, %v; want ErrOtherOptions", again, err)
			}
			if !strings.Contains(err.Error(), "resume with the same options as the first run: "+tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
			after, err := view.New(e.led.Redis()).Counts(ctx, res.Batch)
			if err != nil {
				t.Fatal(err)
			}
			if after.Rows[lifecycle.Queued] != before.Rows[lifecycle.Queued] || again.Registered != 0 {
				t.Errorf("the refused rerun registered rows: %d queued before, %d after", before.Rows[lifecycle.Queued], after.Rows[lifecycle.Queued])
			}
			if st, err := view.New(e.led.Redis()).Status(ctx, res.Batch); err != nil || !st.Interrupted {
				t.Errorf("after the refused rerun the batch is %+v, %v; want loading, interrupted", st, err)
			}
			// With the first run's options it completes: one reading.
			done, err := e.ld.LoadFile(ctx, path, first)
			if err != nil || !done.Resumed {
				t.Fatalf("rerun with the first options = %+v, %v", done, err)
			}
			amounts := map[string]int{}
			if err := view.New(e.led.Redis()).Each(ctx, res.Batch, func(p ledger.Payout) error {
				amounts[p.Amount]++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(amounts) != 1 || amounts["1500"] != interruptRows {
				t.Errorf("amounts of the batch: %v; want %d × 1500", amounts, interruptRows)
			}
			c, _ := view.New(e.led.Redis()).Counts(ctx, res.Batch)
			if got := c.Amount(lifecycle.Queued, 2); got.Cmp(money.MustParse("1800000")) != 0 && c.Rows[lifecycle.Queued] == interruptRows {
				t.Errorf("queued sum %s, want 1800000", got)
			}
		})
	}
}

// TestResumeKeepsApprovalDecision: a rerun of an interrupted load under
// other approval options (here none) decides as the batch was begun: a
// batch that must be approved (four-eyes) awaits approval with no task,
// and the day's sum reserved for a batch that goes is not reserved twice.
func TestResumeKeepsApprovalDecision(t *testing.T) {
	ctx := context.Background()
	for _, at := range []string{pointLocked, pointRegistered} {
		t.Run("four-eyes, killed at "+at, func(t *testing.T) {
			e := newInterruptEnv(t)
			path := writeBig(t, t.TempDir(), "big.csv", interruptRows, 0)
			first := Options{ChunkSize: 100, EnqueueWorkers: 4, Approval: Approval{Required: true, By: "alice", FourEyes: true}}
			first.interrupt = func(pt string, rows int) error {
				if pt == at && (at == pointLocked || rows >= interruptRows/2) {
					return errKilled
				}
				return nil
			}
			res, err := e.ld.LoadFile(ctx, path, first)
			if !errors.Is(err, errKilled) {
				t.Fatalf("first load = %+v, %v", res, err)
			}
			again, err := e.ld.LoadFile(ctx, path, Options{ChunkSize: 100, EnqueueWorkers: 4, Approval: Approval{By: "bob"}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := e.led.Batch(ctx, res.Batch)
			if err != nil {
				t.Fatal(err)
			}
			if b.Phase != lifecycle.PhaseAwaiting || again.Held != "approval required" || again.Enqueued != 0 || !b.FourEyes || b.LoadedBy != "alice" {
				t.Errorf("resumed without approval options: held %q, enqueued %d; batch %s, four-eyes %v, loaded by %q; want awaiting approval of a four-eyes batch loaded by alice",
					again.Held, again.Enqueued, b.Phase, b.FourEyes, b.LoadedBy)
			}
			if n := e.tasks(t); n != 0 {
				t.Errorf("%d create tasks for a batch awaiting approval", n)
			}
		})
	}
	t.Run("daily limit reserved once", func(t *testing.T) {
		e := newInterruptEnv(t)
		path := writeBig(t, t.TempDir(), "big.csv", interruptRows, 0)
		dry, err := e.ld.LoadFile(ctx, path, Options{DryRun: true})
		if err != nil || !dry.Loaded {
			t.Fatalf("dry run = %+v, %v", dry, err)
		}
		// Room for the batch once and a half: reserved twice, it would
		// wait for approval.
		units := dry.Total.Minor(2)
		a := Approval{DailyLimit: money.FromMinor(units+units/2, 2)}
		res, err := e.ld.LoadFile(ctx, path, killAtHalf(Options{ChunkSize: 100, EnqueueWorkers: 4, Approval: a}))
		if !errors.Is(err, errKilled) {
			t.Fatalf("first load = %+v, %v", res, err)
		}
		again, err := e.ld.LoadFile(ctx, path, Options{ChunkSize: 100, EnqueueWorkers: 4, Approval: a})
		if err != nil || !again.Resumed {
			t.Fatalf("rerun = %+v, %v", again, err)
		}
		if again.Held != "" || again.Enqueued != interruptRows {
			t.Errorf("rerun held %q, enqueued %d: the day's sum was reserved again", again.Held, again.Enqueued)
		}
		// Reserved once: the other half fits, a cent more does not.
		if _, _, err := e.led.Controls().ReserveDaily(ctx, money.FromMinor(units/2, 2), a.DailyLimit, 2); err != nil {
			t.Errorf("the rest of the limit does not fit: %v", err)
		}
		if _, _, err := e.led.Controls().ReserveDaily(ctx, money.MustParse("0.01"), a.DailyLimit, 2); !errors.Is(err, ledger.ErrDailyLimit) {
			t.Errorf("the day's sum is below the limit after reserving its rest: %v (the batch was not reserved)", err)
		}
	})
}

// TestStalledLoaderAfterDiscard: a loader stalls past its lease while
// payout discard abandons the batch (taking the expired lock, cancelling,
// releasing); when it wakes it neither registers rows nor finishes the
// batch to loaded: the batch stays discarded, without a task.
func TestStalledLoaderAfterDiscard(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		resume bool   // the stalled loader is a rerun of an interrupted load
		point  string // where it stalls
	}{
		{"fresh load, stalled before finishing", false, pointLoaded},
		{"resumed load, stalled while registering", true, pointRegistered},
		{"resumed load, stalled before finishing", true, pointLoaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newInterruptEnv(t)
			path := writeBig(t, t.TempDir(), "big.csv", interruptRows, 0)
			opts := Options{ChunkSize: 100, EnqueueWorkers: 4}
			var batch string
			if tc.resume {
				res, err := e.ld.LoadFile(ctx, path, killAtHalf(opts))
				if !errors.Is(err, errKilled) {
					t.Fatalf("first load = %+v, %v", res, err)
				}
				batch = res.Batch
			}
			stalled := false
			opts.interrupt = func(pt string, rows int) error {
				if stalled || pt != tc.point || pt == pointRegistered && rows < interruptRows/4 {
					return nil
				}
				stalled = true
				// The lease expires; payout discard abandons the batch.
				b, err := view.New(e.led.Redis()).BatchIDs(ctx)
				if err != nil || len(b) != 1 {
					return fmt.Errorf("batches %v, %v", b, err)
				}
				batch = b[0]
				if err := e.rdb.Del(ctx, keys.LoadLock(batch)).Err(); err != nil {
					return err
				}
				_, err = e.led.DiscardBatch(ctx, batch, "ops", "abandoned")
				return err
			}
			res, err := e.ld.LoadFile(ctx, path, opts)
			if !stalled {
				t.Fatalf("the loader never stalled: %+v, %v", res, err)
			}
			// The load failed: its lease was lost (ErrLoadLockLost), or the
			// ledger refused a step of a batch no longer loading; either way
			// the discard stands (below).
			if err == nil {
				t.Error("the stalled loader's load succeeded after its batch was discarded")
			}
			b, err := e.led.Batch(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			if b.Phase != lifecycle.PhaseDiscarded {
				t.Errorf("batch phase %s after the discard, want discarded", b.Phase)
			}
			c, err := view.New(e.led.Redis()).Counts(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			if c.Rows[lifecycle.Queued] != 0 {
				t.Errorf("%d payouts queued in a discarded batch (registered after the discard)", c.Rows[lifecycle.Queued])
			}
			if n := e.tasks(t); n != 0 {
				t.Errorf("%d create tasks for a discarded batch", n)
			}
		})
	}
}
