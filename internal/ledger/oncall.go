package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// AwaitingOutcome names, in Oldest's answer and in metrics, the created
// payouts whose outcome the workers still follow: open, though their state
// is created.
const AwaitingOutcome lifecycle.State = "awaiting_outcome"

// Oldest returns, for each open state of batch (queued, submitting,
// checking, AwaitingOutcome) and for needs_review, the time of the last
// transition of its oldest payout in that state: when the payout entered
// the state ('entered', stamped with Redis's clock by every state change;
// a queued payout that was never sent has its registration time, a payout
// last moved before 'entered' existed its last transition). States
// without a payout are absent.
//
// It reads every payout of the batch: one HMGET of four fields each,
// pipelined eachChunk at a time, as the reconciler's sweep does. Call it
// only for batches whose counters show a payout in one of those states,
// and from one process at a time (internal/metrics holds a lease).
func (l *Ledger) Oldest(ctx context.Context, batch string) (map[lifecycle.State]time.Time, error) {
	out := map[lifecycle.State]time.Time{}
	err := l.eachIDs(ctx, batch, func(ids []string) error {
		pipe := l.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, payoutKey(batch, id), "state", "entered", "track", "updated")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("ledger: read payouts of %s: %w", batch, err)
		}
		for _, c := range cmds {
			v := c.Val()
			st := lifecycle.State(str(v[0]))
			switch {
			case st == lifecycle.Created && str(v[2]) == "1":
				st = AwaitingOutcome
			case st.Open(), st == lifecycle.NeedsReview:
			default:
				continue
			}
			t := msTime(str(v[1]))
			if str(v[1]) == "" { // moved last before 'entered' was kept
				t = msTime(str(v[3]))
			}
			if old, ok := out[st]; !ok || t.Before(old) {
				out[st] = t
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
