package cli

import (
	"context"
	"time"

	"github.com/acme/payout/internal/operator"
)

// runRedeliver queues events of an endpoint's delivery log again:
// operator's Redeliver, as the console's Deliveries page does.
func runRedeliver(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "redeliver", "[flags] ENDPOINT")
	var (
		q           queueAction
		event       string
		failedSince string
	)
	q.register(fs, "redelivers")
	fs.StringVar(&event, "event", "", "the id of the one event to send again (webhook-id)")
	fs.StringVar(&failedSince, "failed-since", "", "send again every event whose last attempt failed at or after this time (RFC 3339, or a duration back from now: 6h)")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("redeliver takes one ENDPOINT (its id, as the console's Deliveries page and payout_webhook_deliveries_total show it)")
	}
	since, err := parseSince(failedSince, time.Now())
	if err != nil {
		return err
	}
	rdb, acts, err := q.open(ctx, e, nil)
	if err != nil {
		return err
	}
	defer rdb.Close()
	r, err := acts.Redeliver(ctx, operator.Redelivery{Endpoint: fs.Arg(0), Event: event, Since: since, By: q.who, Note: q.note})
	if err != nil {
		return commandErr(err)
	}
	q.done(e, r.Words(), r.Unrecorded)
	return nil
}

// parseSince reads --failed-since: RFC 3339, or a duration back from now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, usageErr("--failed-since %q: want an RFC 3339 time (2026-12-02T09:00:00Z) or a duration back from now (6h)", v)
	}
	return now.Add(-d), nil
}
