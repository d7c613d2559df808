package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// BeginCreateAcked is BeginCreate followed, on the same connection, by
// WAIT replicas timeout: Redis acknowledges a write to replicas per
// connection, so the two go in one pipeline on a plain client (for a
// cluster, the master of the payout's slot). It returns the decision and
// how many replicas acknowledged the submitting mark. conn must not be an
// autopipeliner, whose commands may travel on different connections.
//
// A caller that gets Proceed with fewer acknowledgements than it asked for
// must not send: a failover now could bring up a replica without the mark,
// and a redelivered task would send the create again. It hands the payout
// back to queued (FinishCreate, nothing sent).
func (l *Ledger) BeginCreateAcked(ctx context.Context, conn redis.UniversalClient, batch, ext string, attempt, replicas int, timeout time.Duration) (Begin, int, error) {
	key := payoutKey(batch, ext)
	var c redis.Cmdable = conn
	if cc, ok := conn.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return Begin{}, 0, fmt.Errorf("ledger: master of %s: %w", ext, err)
		}
		c = m
	}
	// One operation id for every try, and transition's retry of a
	// transport fault: a run that happened answers its first decision.
	args := append(beginArgs{Attempt: attempt, Note: interruptedNote, Keys: l.keys}.argv(), l.actor, l.newOp())
	var begin, wait *redis.Cmd
	err := retryTransport(ctx, func() error {
		pipe := c.Pipeline()
		begin = beginCreateScript.Eval(ctx, pipe, beginKeys(batch, ext), args...)
		wait = pipe.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		return Begin{}, 0, fmt.Errorf("ledger: begin create of %s with WAIT: %w", ext, err)
	}
	b, err := parseBegin(batch, ext, begin)
	if err != nil {
		return Begin{}, 0, err
	}
	acked, err := wait.Int()
	if err != nil {
		return Begin{}, 0, fmt.Errorf("ledger: WAIT after begin create of %s: %w", ext, err)
	}
	return b, acked, nil
}
