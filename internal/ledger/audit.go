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

// RawAudit is one entry of a batch's audit stream as stored.
type RawAudit struct {
	ID     string            `json:"id"`
	Fields map[string]string `json:"fields"`
}

// Time is when the entry was written (Redis time).
func (e RawAudit) Time() time.Time { return msTime(e.Fields["t"]) }

// Entry is the entry as the audit trail shows it: the one place that
// reads the stored fields of an audit entry (payout history, the spool's
// and the archive's audit files).
func (e RawAudit) Entry() AuditEntry {
	a := AuditEntry{ID: e.ID, Time: e.Time(), Context: map[string]string{}}
	for k, v := range e.Fields {
		switch k {
		case "t":
		case "actor":
			a.Actor = v
		case "ext":
			a.ExternalID = v
		case "from":
			a.From = v
		case "to":
			a.To = v
		default:
			a.Context[k] = v
		}
	}
	if len(a.Context) == 0 {
		a.Context = nil
	}
	return a
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
	key, of := globalAuditKey(), "the queue"
	if batch != "" {
		key, of = auditKey(batch), batch
	}
	return l.eachAudit(ctx, key, of, func(r RawAudit) error {
		e := r.Entry()
		if ext != "" && e.ExternalID != ext {
			return nil
		}
		return fn(e)
	})
}

// EachAuditRaw calls fn for every entry of batch's audit stream in order,
// 1,000 per round trip.
func (l *Ledger) EachAuditRaw(ctx context.Context, batch string, fn func(RawAudit) error) error {
	return l.eachAudit(ctx, auditKey(batch), batch, fn)
}

// eachAudit calls fn for every entry of the audit stream key (the trail
// of of) in order, 1,000 per round trip.
func (l *Ledger) eachAudit(ctx context.Context, key, of string, fn func(RawAudit) error) error {
	start := "-"
	for {
		msgs, err := l.rdb.XRangeN(ctx, key, start, "+", 1000).Result()
		if err != nil {
			return fmt.Errorf("ledger: read audit trail of %s: %w", of, err)
		}
		for _, m := range msgs {
			if err := fn(rawAudit(m)); err != nil {
				return err
			}
		}
		if len(msgs) < 1000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// rawAudit is a message of an audit stream as stored.
func rawAudit(m redis.XMessage) RawAudit {
	e := RawAudit{ID: m.ID, Fields: make(map[string]string, len(m.Values))}
	for k, v := range m.Values {
		e.Fields[k], _ = v.(string)
	}
	return e
}
