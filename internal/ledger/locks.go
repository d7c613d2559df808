package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Locks are the locks and leases of the ledger, each a key that expires:
// a batch's load lock, which one loader holds while it registers the
// batch (the steps of a load check it), and the leases of periodic work
// that one process at a time should do.
type Locks struct{ l *Ledger }

// Locks returns the ledger's locks and leases.
func (l *Ledger) Locks() Locks { return Locks{l} }

// ErrLoadLockLost is returned by the steps of a load (RegisterLocked,
// SetBatchFigures, FinishLoad) when the caller no longer holds the batch's
// load lock: that step wrote nothing.
var ErrLoadLockLost = errors.New("ledger: load lock of the batch lost")

// LockLoad takes the batch's load lock for owner (a random token) for ttl.
// It reports false when another loader holds it.
func (lk Locks) LockLoad(ctx context.Context, batch, owner string, ttl time.Duration) (bool, error) {
	ok, err := lk.l.rdb.SetNX(ctx, loadLockKey(batch), owner, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("ledger: lock load of %s: %w", batch, err)
	}
	return ok, nil
}

// RefreshLoad extends owner's load lock; false means it was lost.
func (lk Locks) RefreshLoad(ctx context.Context, batch, owner string, ttl time.Duration) (bool, error) {
	n, err := refreshLockScript.Run(ctx, lk.l.rdb, []string{loadLockKey(batch)}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("ledger: refresh load lock of %s: %w", batch, err)
	}
	return n == 1, nil
}

// UnlockLoad releases owner's load lock (a lock taken over by another
// loader is left alone).
func (lk Locks) UnlockLoad(ctx context.Context, batch, owner string) error {
	if err := releaseScript.Run(ctx, lk.l.rdb, []string{loadLockKey(batch)}, owner).Err(); err != nil {
		return fmt.Errorf("ledger: unlock load of %s: %w", batch, err)
	}
	return nil
}

// TryLease takes the lease name for owner for ttl unless someone holds it:
// periodic work that one process at a time should do (the reconciler's
// sweep) runs only where TryLease said true.
func (lk Locks) TryLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	ok, err := lk.l.rdb.SetNX(ctx, leaseKey(name), owner, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("ledger: take lease %s: %w", name, err)
	}
	return ok, nil
}

// Leased calls pass every interval until ctx is done, in whichever
// process holds the lease name for that interval (TryLease): of the
// processes running the same periodic work (the reconciler's sweep, the
// releaser's pass, the events' pump), one a time makes each pass. Each
// call owns the lease under its own name (host:pid:start). A lease that
// could not be taken (Redis) goes to leaseErr, and the next interval is
// tried; pass logs its own failures.
func (lk Locks) Leased(ctx context.Context, name string, interval time.Duration, leaseErr func(error), pass func(context.Context)) {
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := lk.TryLease(ctx, name, owner, interval)
		if err != nil {
			leaseErr(err)
			continue
		}
		if ok {
			pass(ctx)
		}
	}
}
