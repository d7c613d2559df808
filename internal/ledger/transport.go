package ledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// transitionTries bounds how often transition sends one transition call.
const transitionTries = 5

// transition runs a transition script on one payout (KEYS: payout,
// counts, audit stream) with the actor and a fresh operation id appended to
// args. When the call fails in transport (connection cut, timeout: the
// script may have run and its reply been lost), it is sent again with the
// SAME id, after a jittered backoff, up to transitionTries times in all: a
// run that did happen answers with its first decision (luaReplay), so the
// caller gets that decision instead of an error that would make its task
// retry and judge the payout afresh (for a lost begin-create reply: a
// status check for a create that was never sent). An error reply of Redis
// itself, or the caller's context ending, is returned at once.
func (l *Ledger) transition(ctx context.Context, s *redis.Script, batch, ext string, a scriptArgs) *redis.Cmd {
	return l.transitionKeys(ctx, s, []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch)}, a)
}

// scriptArgs is a transition script's ARGV as one struct (beginArgs,
// checkArgs...): argv lists them in the order the script reads them
// (TestTransitionArgsMatchTheirScripts).
type scriptArgs interface{ argv() []any }

// transitionKeys is transition with the script's keys given (the payout,
// counts and audit keys first).
func (l *Ledger) transitionKeys(ctx context.Context, s *redis.Script, keys []string, a scriptArgs) *redis.Cmd {
	args := append(a.argv(), actorArg(ctx, l.actor), l.newOp())
	var cmd *redis.Cmd
	_ = retryTransport(ctx, func() error {
		cmd = s.Run(ctx, l.rdb, keys, args...)
		return cmd.Err()
	})
	return cmd
}

// retryTransport calls send until it returns no transport fault, at most
// transitionTries times, waiting a jittered backoff from 20ms, doubling,
// between calls; the caller's context ending stops the waiting. send must
// repeat the same call (the same operation id): see transition. It
// returns send's last error.
func retryTransport(ctx context.Context, send func() error) error {
	wait := 20 * time.Millisecond
	for try := 1; ; try++ {
		err := send()
		if err == nil || err == redis.Nil || !transportFault(ctx, err) || try == transitionTries {
			return err
		}
		d := wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// transportFault tells a fault on the way to or from Redis (the command
// may or may not have run) from an answer of Redis and from the caller's
// own cancellation.
func transportFault(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr)
}
