package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/scrub"
)

// AuditEntry is one line of the audit trail: a state change of a payout
// (ExternalID set) or of a batch (approval), or an operator's action on
// the queue (the global trail).
type AuditEntry struct {
	ID    string    `json:"id"` // stream id, in time order
	Time  time.Time `json:"time"`
	Actor string    `json:"actor"` // worker host:pid or operator name
	// Role is the role the person acted in (internal/access; WithRole),
	// "" for a worker's entry or one written before roles.
	Role       string            `json:"role,omitempty"`
	ExternalID string            `json:"externalId,omitempty"`
	From       string            `json:"from,omitempty"`
	To         string            `json:"to"`
	Context    map[string]string `json:"context,omitempty"` // attempt, seq, oseq, http, order, psp, note
}

// rawEntry is one entry of a batch's audit stream as stored.
type rawEntry struct {
	ID     string            `json:"id"`
	Fields map[string]string `json:"fields"`
}

// entry is the entry as the audit trail shows it: the one place that
// reads the stored fields of an audit entry (Audit.Each: payout history,
// the spool's and the archive's audit files).
func (e rawEntry) entry() AuditEntry {
	a := AuditEntry{ID: e.ID, Time: msTime(e.Fields["t"]), Context: map[string]string{}}
	for k, v := range e.Fields {
		switch k {
		case "t":
		case "actor":
			a.Actor = v
		case "role":
			a.Role = v
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

// Audit is the audit trail: one stream a batch of its payouts' state
// changes (the transition scripts write it), and the global one of the
// operator actions that concern no batch.
type Audit struct{ l *Ledger }

// Audit returns the ledger's audit trail.
func (l *Ledger) Audit() Audit { return Audit{l} }

// Actor is who this ledger records transitions as.
func (l *Ledger) Actor() string { return l.actor }

// Queue records an action on the payout queue (paused, resumed) in
// the global audit trail.
func (a Audit) Queue(ctx context.Context, actor, action, note string) error {
	actor, note, err := typedNote(actor, note, scrub.MaxNote)
	if err != nil {
		return fmt.Errorf("ledger: audit %s: %w", action, err)
	}
	now, err := a.l.Time(ctx)
	if err != nil {
		return err
	}
	values := []any{"t", now.UnixMilli(), "actor", actor, "ext", "", "from", "", "to", action, "note", note}
	if r := roleOf(ctx); r != "" {
		values = append(values, "role", r)
	}
	err = a.l.rdb.XAdd(ctx, &redis.XAddArgs{Stream: globalAuditKey(), Values: values}).Err()
	if err != nil {
		return fmt.Errorf("ledger: audit %s: %w", action, err)
	}
	return nil
}

// Each calls fn for every entry of a batch's audit trail ("" for the
// global one) in time order, 1,000 per round trip; with ext set, only that
// payout's.
func (a Audit) Each(ctx context.Context, batch, ext string, fn func(AuditEntry) error) error {
	key, of := globalAuditKey(), "the queue"
	if batch != "" {
		key, of = auditKey(batch), batch
	}
	return a.l.eachAudit(ctx, key, of, func(r rawEntry) error {
		e := r.entry()
		if ext != "" && e.ExternalID != ext {
			return nil
		}
		return fn(e)
	})
}

// eachAudit calls fn for every entry of the audit stream key (the trail
// of of) in order, 1,000 per round trip.
func (l *Ledger) eachAudit(ctx context.Context, key, of string, fn func(rawEntry) error) error {
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
func rawAudit(m redis.XMessage) rawEntry {
	e := rawEntry{ID: m.ID, Fields: make(map[string]string, len(m.Values))}
	for k, v := range m.Values {
		e.Fields[k], _ = v.(string)
	}
	return e
}

// Len returns the number of entries of batch's audit stream.
func (a Audit) Len(ctx context.Context, batch string) (int64, error) {
	n, err := a.l.rdb.XLen(ctx, auditKey(batch)).Result()
	if err != nil {
		return 0, fmt.Errorf("ledger: audit trail of %s: %w", batch, err)
	}
	return n, nil
}

// Last returns the Redis time of the last entry of batch's audit
// stream; ok is false when the batch has no audit trail.
func (a Audit) Last(ctx context.Context, batch string) (t time.Time, ok bool, err error) {
	msgs, err := a.l.rdb.XRevRangeN(ctx, auditKey(batch), "+", "-", 1).Result()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: audit trail of %s: %w", batch, err)
	}
	if len(msgs) == 0 {
		return time.Time{}, false, nil
	}
	ms, _, _ := cutDash(msgs[0].ID)
	return time.UnixMilli(ms).UTC(), true, nil
}
