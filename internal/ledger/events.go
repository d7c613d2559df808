package ledger

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// EventTypes is the one table from a payout state to the type of the
// event of a move into it. A state it does not name gets "payout." and
// its name (EventType): a state added to the machine (docs/design.md,
// "How to add a state") has its event without a line here; a row is
// needed only to give a state another name.
var EventTypes = map[lifecycle.State]string{
	lifecycle.Queued:      "payout.queued",
	lifecycle.Submitting:  "payout.submitting",
	lifecycle.Checking:    "payout.checking",
	lifecycle.Created:     "payout.created",
	lifecycle.Paid:        "payout.paid",
	lifecycle.Failed:      "payout.failed",
	lifecycle.Rejected:    "payout.rejected",
	lifecycle.NeedsReview: "payout.needs_review",
	lifecycle.Cancelled:   "payout.cancelled",
	"returned":            "payout.returned",
}

// EventType is the type of the event of a move into state st.
func EventType(st lifecycle.State) string {
	if t, ok := EventTypes[st]; ok {
		return t
	}
	return "payout." + string(st)
}

// luaEventTypes is the Lua constant EVTYPE built from EventTypes, which
// move() reads (with the same fallback as EventType).
func luaEventTypes() string {
	var b strings.Builder
	b.WriteString("\nlocal EVTYPE = {")
	sts := make([]string, 0, len(EventTypes))
	for st := range EventTypes {
		sts = append(sts, string(st))
	}
	sort.Strings(sts)
	for _, st := range sts {
		fmt.Fprintf(&b, "[%q] = %q, ", st, EventTypes[lifecycle.State(st)])
	}
	b.WriteString("}\n")
	return b.String()
}

// OutboxEvent is one entry of a batch's outbox (keys.Events): the event
// of one payout state change, written by the transition that made it.
type OutboxEvent struct {
	StreamID   string // the entry's id in the outbox
	Batch      string
	ExternalID string
	Seq        int64 // the payout's event sequence: 1, 2, 3... per payout
	Type       string
	From, To   lifecycle.State
	AtMillis   int64  // Redis time of the transition
	Amount     string // exact decimal text
	// Destination is the masked display form (card 6/4, or the telecom
	// operator and number): never the sealed card number nor a token.
	Destination string
}

// Outbox returns up to n events of batch's outbox, oldest first.
func (l *Ledger) Outbox(ctx context.Context, batch string, n int64) ([]OutboxEvent, error) {
	msgs, err := l.rdb.XRangeN(ctx, keys.Events(batch), "-", "+", n).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: outbox of %s: %w", batch, err)
	}
	out := make([]OutboxEvent, 0, len(msgs))
	for _, m := range msgs {
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		seq, _ := strconv.ParseInt(s("seq"), 10, 64)
		out = append(out, OutboxEvent{
			StreamID: m.ID, Batch: batch, ExternalID: s("ext"), Seq: seq, Type: s("type"),
			From: lifecycle.State(s("from")), To: lifecycle.State(s("to")), AtMillis: atoi64(s("t")),
			Amount: s("amount"), Destination: s("dest"),
		})
	}
	return out, nil
}

// OutboxLen is how many events batch's outbox holds: events of its
// payouts' changes a worker's events pump has not handed to delivery yet.
func (l *Ledger) OutboxLen(ctx context.Context, batch string) (int64, error) {
	n, err := l.rdb.XLen(ctx, keys.Events(batch)).Result()
	if err != nil {
		return 0, fmt.Errorf("ledger: outbox of %s: %w", batch, err)
	}
	return n, nil
}

// AckOutbox deletes the entries ids of batch's outbox: their deliveries
// are queued.
func (l *Ledger) AckOutbox(ctx context.Context, batch string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	if err := ackOutboxScript.Run(ctx, l.rdb, []string{keys.Events(batch)}, args...).Err(); err != nil {
		return fmt.Errorf("ledger: outbox of %s: %w", batch, err)
	}
	return nil
}

// ackOutboxScript deletes entries of an outbox, and the outbox once it is
// empty (in one call: a transition's XADD cannot fall in between).
var ackOutboxScript = redis.NewScript(`
redis.call('XDEL', KEYS[1], unpack(ARGV))
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 0
`)

// OutboxBatches returns the batches whose outbox holds events: one
// pipelined XLEN per batch of the batch index (an empty outbox is no
// key).
func (l *Ledger) OutboxBatches(ctx context.Context) ([]string, error) {
	ids, err := l.rdb.ZRange(ctx, batchesKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: batches: %w", err)
	}
	cmds := make([]*redis.IntCmd, len(ids))
	_, err = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.XLen(ctx, keys.Events(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: outbox lengths: %w", err)
	}
	var out []string
	for i, c := range cmds {
		if c.Val() > 0 {
			out = append(out, ids[i])
		}
	}
	return out, nil
}
