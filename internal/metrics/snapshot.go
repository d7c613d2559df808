// Package metrics holds the on-call series that are not counted by the
// process that exports them: the gauges read from the ledger (open payouts
// by state and the age of the oldest in each, payouts needing review and
// awaiting approval, with their amounts), Redis's memory against its
// maxmemory, and the loader's last runs, written for node_exporter's
// textfile collector.
//
// The ledger gauges cost a read of every payout of the batches that have an
// open or needs_review payout (Ledger.Oldest), so one worker at a time
// computes them: Publisher takes a lease for each interval, computes a
// Snapshot and stores it in Redis; every worker's Collector exports the
// stored snapshot at scrape time (one pipelined GET, TIME and INFO memory),
// so all workers show the same values and alert rules take max() over them.
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/view"
	"github.com/redis/go-redis/v9"
)

// States are the states the ledger gauges are exported for: the open ones
// (an automatic step is due) and needs_review (a person's step is due).
var States = func() []lifecycle.State {
	var out []lifecycle.State
	for _, s := range lifecycle.Machine {
		if s.State.Open() {
			out = append(out, s.State)
		}
	}
	return append(out, ledger.AwaitingOutcome, lifecycle.NeedsReview)
}()

// Figures are the payouts of one state across all batches.
type Figures struct {
	Payouts int64
	Amount  money.Amount // exact; a float only in the exported sample
	// Oldest is when the oldest of them entered the state (Redis time);
	// zero when there is none.
	Oldest time.Time
}

// figuresJSON is Figures as stored: the amount as exact decimal text.
type figuresJSON struct {
	Payouts int64     `json:"n"`
	Amount  string    `json:"amount"`
	Oldest  time.Time `json:"oldest"`
}

// MarshalJSON stores the amount as decimal text.
func (f Figures) MarshalJSON() ([]byte, error) {
	return json.Marshal(figuresJSON{f.Payouts, f.Amount.String(), f.Oldest})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (f *Figures) UnmarshalJSON(b []byte) error {
	var j figuresJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	a := money.Zero
	if j.Amount != "0" {
		var err error
		if a, err = money.Parse(j.Amount, 18); err != nil {
			return err
		}
	}
	*f = Figures{Payouts: j.Payouts, Amount: a, Oldest: j.Oldest}
	return nil
}

// Snapshot is the ledger gauges at one moment.
type Snapshot struct {
	At     time.Time                   `json:"at"` // Redis time of the computation
	States map[lifecycle.State]Figures `json:"states"`
	// Approval: the batches awaiting approval and their payouts (Oldest:
	// when the oldest of those batches was loaded).
	Approval        Figures `json:"approval"`
	ApprovalBatches int64   `json:"approvalBatches"`
	// Scheduled counts the payouts waiting for their release time, those
	// of batches awaiting approval included (discarded batches' not).
	Scheduled int64 `json:"scheduled"`
}

// Compute reads the snapshot from l: the counters of every batch (two
// pipelined round trips), then Ledger.Oldest of each batch with a payout
// in one of States, except the batches awaiting approval, whose payouts are
// counted under Approval.
func Compute(ctx context.Context, l *ledger.Ledger) (Snapshot, error) {
	now, err := l.Time(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	batches, err := view.New(l.Redis()).Statuses(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{At: now, States: map[lifecycle.State]Figures{}}
	for _, st := range States {
		s.States[st] = Figures{}
	}
	for _, b := range batches {
		c := b.Counts
		amount := func(units int64) money.Amount { return money.FromMinor(units, b.Scale) }
		if b.Phase != lifecycle.PhaseDiscarded {
			s.Scheduled += c.Rows[lifecycle.Scheduled]
		}
		switch b.Phase {
		case lifecycle.PhaseAwaiting:
			s.ApprovalBatches++
			s.Approval.Payouts += c.Rows[lifecycle.Queued]
			s.Approval.Amount = s.Approval.Amount.Add(amount(c.Units[lifecycle.Queued]))
			if s.Approval.Oldest.IsZero() || b.LoadedAt.Before(s.Approval.Oldest) {
				s.Approval.Oldest = b.LoadedAt
			}
			continue
		case lifecycle.PhaseDiscarded:
			continue
		}
		n := map[lifecycle.State]int64{ledger.AwaitingOutcome: c.Awaiting}
		u := map[lifecycle.State]int64{ledger.AwaitingOutcome: c.AwaitingUnits}
		any := false
		for _, st := range States {
			if st != ledger.AwaitingOutcome {
				n[st], u[st] = c.Rows[st], c.Units[st]
			}
			if n[st] > 0 {
				any = true
				f := s.States[st]
				f.Payouts += n[st]
				f.Amount = f.Amount.Add(amount(u[st]))
				s.States[st] = f
			}
		}
		if !any {
			continue
		}
		oldest, err := l.Oldest(ctx, b.ID)
		if err != nil {
			return Snapshot{}, err
		}
		for st, t := range oldest {
			f, ok := s.States[st]
			if ok && (f.Oldest.IsZero() || t.Before(f.Oldest)) {
				f.Oldest = t
				s.States[st] = f
			}
		}
	}
	return s, nil
}

// Store writes s where every worker's Collector reads it, for ttl.
func Store(ctx context.Context, rdb redis.UniversalClient, s Snapshot, ttl time.Duration) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("metrics: encode snapshot: %w", err)
	}
	if err := rdb.Set(ctx, keys.MetricsSnapshot(), b, ttl).Err(); err != nil {
		return fmt.Errorf("metrics: store snapshot: %w", err)
	}
	return nil
}

func decodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return Snapshot{}, fmt.Errorf("metrics: decode snapshot: %w", err)
	}
	return s, nil
}
