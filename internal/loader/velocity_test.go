package loader

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/view"
)

// sameCard is a file of rows, each of amount, all to one card, externalIds
// PREFIX-1...
func sameCard(prefix string, rows int, amount string) string {
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber,telecomOperator\n")
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "%s-%d,%s,4111 1111 1111 1111,\n", prefix, i, amount)
	}
	return b.String()
}

// velocityCount is the card's count today as the ledger holds it.
func (f *fixture) velocityCount(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	day, err := f.led.Velocity().Day(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := f.rdb.HGet(ctx, keys.Velocity(day, f.ring.DestinationTag("card:4111111111111111")), "#n").Result()
	return n
}

// TestVelocityAcrossConcurrentLoads: two files of three rows each to the
// same card, loaded at once, against a limit of four payouts a day: under
// hold exactly four are queued and two held, under refuse exactly one
// file loads and the other is refused whole with its lines; repeated so
// that the loads interleave.
func TestVelocityAcrossConcurrentLoads(t *testing.T) {
	for _, action := range []string{VelocityHold, VelocityRefuse} {
		t.Run(action, func(t *testing.T) {
			for round := range 5 {
				f := newFixture(t)
				opts := Options{Velocity: Velocity{Limits: ledger.VelocityLimits{Count: 4}, Action: action}}
				dir := t.TempDir()
				paths := []string{writeFile(t, dir, "a.csv", sameCard(fmt.Sprintf("A%d", round), 3, "10")),
					writeFile(t, dir, "b.csv", sameCard(fmt.Sprintf("B%d", round), 3, "10"))}
				results := make([]Result, 2)
				var wg sync.WaitGroup
				for i, p := range paths {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var err error
						if results[i], err = f.ld.LoadFile(context.Background(), p, opts); err != nil {
							t.Error(err)
						}
					}()
				}
				wg.Wait()
				queued, held := f.states(t, results)
				switch action {
				case VelocityHold:
					if queued != 4 || held != 2 || f.pending() != 4 || f.velocityCount(t) != "4" {
						t.Fatalf("round %d: queued %d, held %d, tasks %d, count %s: want 4, 2, 4, 4", round, queued, held, f.pending(), f.velocityCount(t))
					}
				case VelocityRefuse:
					loaded := 0
					for _, r := range results {
						if r.Loaded {
							loaded++
							continue
						}
						if len(r.Errors) == 0 || r.Errors[0].Kind != payfile.KindLimit || r.Errors[0].Column != payfile.ColCardNumber ||
							!strings.Contains(r.Errors[0].Message, "411111******1111 has 4 payouts today, the limit is 4") {
							t.Fatalf("round %d: refused file's errors %+v", round, r.Errors)
						}
					}
					if loaded != 1 || queued != 3 || held != 0 || f.pending() != 3 || f.velocityCount(t) != "3" {
						t.Fatalf("round %d: %d files loaded, queued %d, held %d, tasks %d, count %s: want 1, 3, 0, 3, 3",
							round, loaded, queued, held, f.pending(), f.velocityCount(t))
					}
				}
			}
		})
	}
}

// states counts the queued and held payouts of the batches of results.
func (f *fixture) states(t *testing.T, results []Result) (queued, held int) {
	t.Helper()
	for _, r := range results {
		c, err := view.New(f.led.Redis()).Counts(context.Background(), r.Batch)
		if err != nil {
			continue // a refused file leaves no batch
		}
		queued += int(c.Rows[lifecycle.Queued])
		held += int(c.Rows[lifecycle.Held])
	}
	return queued, held
}

// TestVelocityAmountAndRelease: an amount limit of 50 lets two rows of 20
// go and holds the third; a rerun counts nothing twice; the person's
// release counts the held one and queues it; a cancel gives a count back.
func TestVelocityAmountAndRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	opts := Options{Velocity: Velocity{Limits: ledger.VelocityLimits{Amount: money.MustParse("50")}, Action: VelocityHold}}
	res, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", sameCard("V", 3, "20")), opts)
	if err != nil || !res.Loaded || res.VelocityHeld != 1 || res.Enqueued != 2 {
		t.Fatalf("load: %+v %v", res, err)
	}
	p, err := f.led.Get(ctx, res.Batch, "V-3")
	if err != nil || p.State != lifecycle.Held || !strings.Contains(p.Error, "20.00 more to card 411111******1111 would take today's sum from 40.00 to 60.00, the limit is 50.00 a day") {
		t.Fatalf("V-3: %s %q %v", p.State, p.Error, err)
	}
	if got := f.velocityCount(t); got != "2" {
		t.Fatalf("count %s, want 2", got)
	}
	if _, err := f.led.Release(ctx, res.Batch, "V-3", "alice", "known supplier"); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.led.Get(ctx, res.Batch, "V-3"); p.State != lifecycle.Queued || p.Error != "" {
		t.Fatalf("released V-3: %s %q", p.State, p.Error)
	}
	if got := f.velocityCount(t); got != "3" {
		t.Fatalf("count after the release %s, want 3", got)
	}
	if _, err := f.led.Cancel(ctx, res.Batch, "V-1", "alice", "duplicate"); err != nil {
		t.Fatal(err)
	}
	if got := f.velocityCount(t); got != "2" {
		t.Fatalf("count after a cancel %s, want 2", got)
	}
	// A second file the same day: 20 more would take the sum from 40 to 60.
	res2, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "b.csv", sameCard("W", 1, "20")), opts)
	if err != nil || res2.VelocityHeld != 1 {
		t.Fatalf("second file: %+v %v", res2, err)
	}
}

// TestVelocityRefusePartial: with --partial the rows over the limit are
// left out with their lines, the others load; a file refused whole gives
// back every count it took.
func TestVelocityRefusePartial(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	lim := Velocity{Limits: ledger.VelocityLimits{Count: 2}, Action: VelocityRefuse}
	whole, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", sameCard("P", 3, "1")), Options{Velocity: lim})
	if err != nil || whole.Loaded || len(whole.Errors) != 1 || whole.Errors[0].Line != 4 {
		t.Fatalf("refused: %+v %v", whole, err)
	}
	if got := f.velocityCount(t); got != "0" {
		t.Fatalf("count after a refused file %q, want 0", got)
	}
	part, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", sameCard("P", 3, "1")), Options{Velocity: lim, Partial: true})
	if err != nil || !part.Loaded || part.Registered != 2 || len(part.Errors) != 1 || part.Errors[0].Line != 4 {
		t.Fatalf("partial: %+v %v", part, err)
	}
	if got := f.velocityCount(t); got != "2" {
		t.Fatalf("count %q, want 2", got)
	}
}

// TestVelocityHoldWinsOverASchedule: a row over its recipient's limit
// that also has a release time is held, not scheduled: a scheduled row
// would be released (and sent) by the workers at its time without the
// person's decision the hold asks for.
func TestVelocityHoldWinsOverASchedule(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	opts := releaseOptions("2026-12-10", "")
	opts.Velocity = Velocity{Limits: ledger.VelocityLimits{Count: 2}, Action: VelocityHold}
	res, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "s.csv", sameCard("H", 3, "10")), opts)
	if err != nil || !res.Loaded || res.VelocityHeld != 1 || res.Scheduled != 2 || res.Enqueued != 0 {
		t.Fatalf("load: %+v %v", res, err)
	}
	want := map[string]lifecycle.State{"H-1": lifecycle.Scheduled, "H-2": lifecycle.Scheduled, "H-3": lifecycle.Held}
	for ext, st := range want {
		if p, err := f.led.Get(ctx, res.Batch, ext); err != nil || p.State != st {
			t.Errorf("%s: %s, %v; want %s", ext, p.State, err, st)
		}
	}
	due, err := f.led.Schedule().DueBatches(ctx, time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due index: %v, %v", due, err)
	}
}
