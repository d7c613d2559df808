package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// AuditEntry is one line of the audit trail: a state change of a payout
// (ExternalID set) or of a batch (approval), or an operator's action on
// the queue (the global trail).
type AuditEntry struct {
	ID         string            `json:"id"` // stream id, in time order
	Time       time.Time         `json:"time"`
	Actor      string            `json:"actor"` // worker host:pid or operator name
	ExternalID string            `json:"externalId,omitempty"`
	From       string            `json:"from,omitempty"`
	To         string            `json:"to"`
	Context    map[string]string `json:"context,omitempty"` // attempt, seq, oseq, http, order, psp, note
}

// Actor is who this ledger records transitions as.
func (l *Ledger) Actor() string { return l.actor }

// AuditQueue records an action on the payout queue (paused, resumed) in
// the global audit trail.
func (l *Ledger) AuditQueue(ctx context.Context, actor, action, note string) error {
	now, err := l.Time(ctx)
	if err != nil {
		return err
	}
	err = l.rdb.XAdd(ctx, &redis.XAddArgs{Stream: globalAuditKey(), Values: []any{
		"t", now.UnixMilli(), "actor", actor, "ext", "", "from", "", "to", action, "note", note}}).Err()
	if err != nil {
		return fmt.Errorf("ledger: audit %s: %w", action, err)
	}
	return nil
}

// EachAudit calls fn for every entry of a batch's audit trail ("" for the
// global one) in time order, 1,000 per round trip; with ext set, only that
// payout's.
func (l *Ledger) EachAudit(ctx context.Context, batch, ext string, fn func(AuditEntry) error) error {
	key := globalAuditKey()
	if batch != "" {
		key = auditKey(batch)
	}
	start := "-"
	for {
		msgs, err := l.rdb.XRangeN(ctx, key, start, "+", 1000).Result()
		if err != nil {
			return fmt.Errorf("ledger: read audit trail: %w", err)
		}
		for _, m := range msgs {
			e := parseAudit(m)
			if ext != "" && e.ExternalID != ext {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(msgs) < 1000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

func parseAudit(m redis.XMessage) AuditEntry { return rawAudit(m).Entry() }
