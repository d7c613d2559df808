package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/scrub"
	"github.com/acme/payout/internal/ui"
)

// Redelivery asks for events of an endpoint's delivery log to be sent
// again: Event when given, else every event whose last attempt failed at
// or after Since.
type Redelivery struct {
	Endpoint string // notify.EndpointID
	Event    string
	Since    time.Time
	By, Note string
}

// Redelivered is what Redeliver queued.
type Redelivered struct {
	Endpoint string
	Events   []string
	By       string
	// Unrecorded is the audit failure after the deliveries were queued
	// (they stand).
	Unrecorded error
}

// Words says what a redelivery queued.
func (r Redelivered) Words() string {
	if len(r.Events) == 0 {
		return fmt.Sprintf("nothing to redeliver to endpoint %s: no failed delivery in that time", r.Endpoint)
	}
	if len(r.Events) == 1 {
		return fmt.Sprintf("event %s queued again for endpoint %s by %s", r.Events[0], r.Endpoint, r.By)
	}
	return fmt.Sprintf("%d failed events queued again for endpoint %s by %s", len(r.Events), r.Endpoint, r.By)
}

// Redeliver queues deliveries of an endpoint's log again (notify.Redeliver)
// and records it in the global audit trail (action "redelivered").
func (a *Actions) Redeliver(ctx context.Context, q Redelivery) (Redelivered, error) {
	const cmd = "redeliver"
	r := Redelivered{Endpoint: q.Endpoint, By: q.By}
	if strings.TrimSpace(q.By) == "" {
		return r, refuse(cmd, ErrIncomplete, ErrMissingOperator, incompleteWords(cmd))
	}
	ctx, err := a.allow(ctx, cmd, access.Redeliver, q.By)
	if err != nil {
		return r, err
	}
	if _, err := scrub.Note(q.Note); err != nil {
		return r, refuse(cmd, ErrIncomplete, err, typedWords(err))
	}
	if q.Event == "" && q.Since.IsZero() {
		return r, refuse(cmd, ErrIncomplete, nil, "say which event (--event) or since when the failed ones (--failed-since)")
	}
	evs, err := notify.Redeliver(ctx, a.Ledger.Redis(), q.Endpoint, q.Event, q.Since)
	r.Events = evs
	if errors.Is(err, notify.ErrUnknown) {
		return r, refuse(cmd, ErrNotFound, err, plain(err))
	}
	if err != nil {
		return r, fmt.Errorf("operator: redeliver: %w", err)
	}
	what := "failed since " + q.Since.UTC().Format(time.RFC3339)
	if q.Event != "" {
		what = "event " + q.Event
	}
	note := fmt.Sprintf("endpoint %s, %s: %d queued", q.Endpoint, what, len(evs))
	if q.Note != "" {
		note += "; " + q.Note
	}
	r.Unrecorded = a.Ledger.Audit().Queue(ctx, q.By, "redelivered", note)
	return r, nil
}

// Redeliver redelivers as payout redeliver does (Actions.Redeliver): the
// console's Webhooks page.
func (u UIControls) Redeliver(ctx context.Context, endpoint, event string, since time.Time, by string) (string, error) {
	r, err := u.Actions.Redeliver(ctx, Redelivery{Endpoint: endpoint, Event: event, Since: since, By: by, Note: "in the console"})
	return answer(r.Words(), err)
}

// WebhookEndpoints gives the console's Webhooks page the delivery log of
// every endpoint (notify.Endpoints, notify.Deliveries).
func (c Console) WebhookEndpoints(ctx context.Context, limit int) ([]ui.WebhookEndpoint, error) {
	rdb := c.Ledger.Redis()
	eps, err := notify.Endpoints(ctx, rdb)
	if err != nil {
		return nil, err
	}
	out := make([]ui.WebhookEndpoint, 0, len(eps))
	for _, ep := range eps {
		ds, err := notify.Deliveries(ctx, rdb, ep.ID, int64(limit))
		if err != nil {
			return nil, err
		}
		e := ui.WebhookEndpoint{ID: ep.ID, URL: ep.URL}
		for _, d := range ds {
			e.Deliveries = append(e.Deliveries, ui.WebhookDelivery{Event: d.Event, Type: string(d.Type), Attempts: d.Attempts,
				Status: d.Status, OK: d.OK, At: d.At, Next: d.Next})
		}
		out = append(out, e)
	}
	return out, nil
}
