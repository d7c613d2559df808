package ui

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Webhooks feeds the console's Webhooks page: each endpoint's recent
// deliveries (package notify's delivery log). The operator's Console
// implements it.
type Webhooks interface {
	// WebhookEndpoints lists the endpoints, each with up to limit of its
	// most recent deliveries, newest first.
	WebhookEndpoints(ctx context.Context, limit int) ([]WebhookEndpoint, error)
}

// WebhookEndpoint is one endpoint and its recent deliveries.
type WebhookEndpoint struct {
	ID         string // the endpoint's id (its URL's hash)
	URL        string // redacted: scheme and host
	Deliveries []WebhookDelivery
}

// WebhookDelivery is the log's record of one event to an endpoint.
type WebhookDelivery struct {
	Event, Type string
	Attempts    int
	Status      string // of the last attempt
	OK          bool
	At, Next    time.Time // last attempt; next try (zero: none)
}

// WebhookControls redelivers events, as payout redeliver does. The
// operator's UIControls implement it.
type WebhookControls interface {
	// Redeliver queues event again (or, when event is "", every event
	// whose last attempt failed since since) for endpoint, as by.
	Redeliver(ctx context.Context, endpoint, event string, since time.Time, by string) (string, error)
}

// maxDeliveries is how many deliveries the page shows an endpoint.
const maxDeliveries = 100

// endpointPattern is an endpoint id (notify.EndpointID).
var endpointPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

type webhooksPage struct {
	consolePage
	Endpoints []WebhookEndpoint
	CanAct    bool
}

func (h *consoleHandlers) webhooksPage(w http.ResponseWriter, r *http.Request) {
	src, ok := h.console.(Webhooks)
	if !ok {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return
	}
	eps, err := src.WebhookEndpoints(r.Context(), maxDeliveries)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, canAct := h.controls.(WebhookControls)
	h.renderConsole(w, r, "webhooks", webhooksPage{consolePage: h.base(r, "Webhooks"), Endpoints: eps, CanAct: canAct && !h.readOnly})
}

// redeliver queues one event (form field event) or the failed ones of
// the last hours (form field hours) of an endpoint again.
func (h *consoleHandlers) redeliver(w http.ResponseWriter, r *http.Request) {
	wc, enabled := h.controls.(WebhookControls)
	ep, ok := h.formTarget(w, r, enabled, "endpoint", endpointPattern, func(r *http.Request) string { return r.PathValue("ep") })
	if !ok {
		return
	}
	event := strings.TrimSpace(r.PostFormValue("event"))
	var since time.Time
	if event == "" {
		hours, err := strconv.Atoi(r.PostFormValue("hours"))
		if err != nil || hours <= 0 || hours > 24*30 {
			http.Error(w, "bad hours", http.StatusBadRequest)
			return
		}
		since = time.Now().Add(-time.Duration(hours) * time.Hour)
	}
	msg, err := wc.Redeliver(r.Context(), ep, event, since, userFrom(r.Context()))
	h.doneBack(w, r, "Webhooks", msg, err, "/webhooks", "Back to the webhooks")
}
