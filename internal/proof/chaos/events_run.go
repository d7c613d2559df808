package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/testenv"
)

// eventsDrainFor bounds the wait, once every payout is final, for the
// last events to be delivered (a delivery retried four times waits 5, 10,
// 20 and 40 s).
const eventsDrainFor = 3 * time.Minute

// startEvents makes the webhook secret, starts the node verifier (or,
// outside CI, falls back to the Go library when node is missing) and the
// receiver.
func (h *harness) startEvents(ctx context.Context) error {
	h.webhookSecret = newWebhookSecret()
	p, verify, err := startVerifier(ctx, h.cfg.ModuleDir, h.webhookSecret, h.env, h.path(dirLogs, "verifier.log"))
	switch {
	case errors.Is(err, errNoVerifier) && os.Getenv("CI") != "true":
		h.logf("WARNING: %v; outside CI the deliveries are verified with the Go standardwebhooks library instead", err)
		h.verify, h.verifierName = goVerifier(h.webhookSecret), "go standardwebhooks (node missing)"
	case err != nil:
		return fmt.Errorf("webhook verifier: %w", err)
	default:
		h.procs = append(h.procs, p)
		h.verify, h.verifierName = verify, "node standardwebhooks"
	}
	if h.events, err = NewEventReceiver(h.cfg.Seed, h.verify); err != nil {
		return err
	}
	h.logf("a webhook receiver is subscribed to every event; it verifies each delivery with %s and answers %.0f%% with 500, drops %.0f%%, answers %.0f%% slowly and %.1f%% after the workers' timeout",
		h.verifierName, 100*pEvent500, 100*pEventDrop, 100*pEventSlow, 100*pEventLate)
	return nil
}

// waitEvents waits, the workers still running, until no payout event is
// left in an outbox and no delivery in the notification queue.
func (h *harness) waitEvents(ctx context.Context) {
	if h.events == nil {
		return
	}
	t := time.Now()
	left := ""
	err := testenv.Poll(ctx, eventsDrainFor, 500*time.Millisecond, func() (bool, error) {
		bs, err := h.led.OutboxBatches(ctx)
		if err != nil {
			left = err.Error()
			return false, nil
		}
		info, err := h.insp.GetQueueInfo(notify.Queue)
		if err != nil {
			left = err.Error()
			return false, nil
		}
		n := info.Pending + info.Active + info.Scheduled + info.Retry
		left = fmt.Sprintf("%d batches with events in their outbox, %d deliveries queued (%d retrying), %d archived", len(bs), n, info.Retry, info.Archived)
		return len(bs) == 0 && n == 0, nil
	})
	if err != nil {
		h.logf("events: not every delivery done after %s: %s", eventsDrainFor, left)
		return
	}
	h.logf("events: every delivery done %s after the last payout was final (%s)", time.Since(t).Round(100*time.Millisecond), left)
}

// checkEvents checks the deliveries against the ledger's payouts, then
// proves the verifier refuses a replayed delivery (signed with the
// secret ten minutes ago) and a re-signed one (another secret).
func (h *harness) checkEvents(ctx context.Context, books Books) EventCheck {
	ds, faults, verifyErrs := h.events.Deliveries()
	c := CheckEvents(ds, books.Payouts)
	h.logf("events: %d deliveries, receiver faults %v, %d not verifiable (verifier down)", len(ds), faults, verifyErrs)
	if verifyErrs > 0 {
		h.problem("the webhook verifier could not be asked about %d deliveries", verifyErrs)
	}
	var sample *Delivery
	for i := range ds {
		if ds[i].Verified {
			sample = &ds[i]
			break
		}
	}
	if sample == nil {
		c.Mismatches++
		c.Findings = append(c.Findings, "event: no delivery verified: nothing to replay")
		return c
	}
	for _, ctl := range []struct {
		name, secret string
		at           time.Time
	}{
		{"replayed (timestamp 10 minutes old)", h.webhookSecret, time.Now().Add(-10 * time.Minute)},
		{"re-signed (another secret)", newWebhookSecret(), time.Now()},
	} {
		s, err := notify.NewSigner(ctl.secret)
		if err != nil {
			h.problem("webhook control %s: %v", ctl.name, err)
			continue
		}
		hdr := http.Header{}
		hdr.Set("Content-Type", "application/json")
		if err := s.Headers(hdr, sample.ID, "payout.replayed", ctl.at, sample.Body); err != nil {
			h.problem("webhook control %s: %v", ctl.name, err)
			continue
		}
		ok, err := h.verify(ctx, hdr, sample.Body)
		switch {
		case err != nil:
			h.problem("webhook control %s: %v", ctl.name, err)
		case ok:
			c.Mismatches++
			c.Findings = append(c.Findings, "event: the verifier accepted a "+ctl.name+" delivery")
		default:
			h.logf("events: the verifier (%s) refused a %s delivery", h.verifierName, ctl.name)
		}
	}
	return c
}
