package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A ledger that goes back in time (Redis restarted from an older snapshot,
// a failover to a replica that lagged, a restored backup) has payouts
// back in queued that were created at the PSP: creating them again pays
// twice. Each batch counts its create marks (the field epoch of its meta
// hash, incremented by BeginCreate's proceed); a worker that is answered a
// value no higher than one it saw before has seen the ledger go back, and
// records it here: while the mark exists no worker sends a create, and a
// worker refuses to start, until an operator has reconciled the ledger with
// the PSP and cleared it (docs/operations.md).

// RecordRollback stores what a worker found (the first finding is kept).
func (l *Ledger) RecordRollback(ctx context.Context, what string) error {
	if err := l.rdb.SetNX(ctx, rollbackKey(), what, 0).Err(); err != nil {
		return fmt.Errorf("ledger: record rollback: %w", err)
	}
	return nil
}

// RolledBack returns what a worker found when the ledger went back in
// time, and whether such a finding is recorded.
func (l *Ledger) RolledBack(ctx context.Context) (string, bool, error) {
	s, err := l.rdb.Get(ctx, rollbackKey()).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ledger: read rollback mark: %w", err)
	}
	return s, true, nil
}

// ClearRollback removes the finding once an operator reconciled the
// ledger with the PSP, recording who did in the global audit trail; it
// returns what was found ("" when nothing was).
func (l *Ledger) ClearRollback(ctx context.Context, by, note string) (string, error) {
	what, found, err := l.RolledBack(ctx)
	if err != nil || !found {
		return "", err
	}
	if err := l.rdb.Del(ctx, rollbackKey()).Err(); err != nil {
		return "", fmt.Errorf("ledger: clear rollback mark: %w", err)
	}
	if err := l.Audit().Queue(ctx, by, "ledger-reconciled", "cleared: "+what+"; "+note); err != nil {
		return what, err
	}
	return what, nil
}
