package ui_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// TestWebhooksPage: the console lists an endpoint's deliveries (event,
// attempts, last status, next try) by its redacted URL, and its
// Redeliver button queues the event again as payout redeliver does.
func TestWebhooksPage(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	d, err := notify.NewDeliverer("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	u := down.URL + "/hook/secret-token"
	p, _ := json.Marshal(map[string]any{"url": u, "id": "ev-42", "type": "payout.paid", "body": json.RawMessage(`{"id":"ev-42"}`)})
	_ = d.Logging(e.rdb).ProcessTask(context.Background(), asynq.NewTask(notify.TypeDeliver, p))
	w := e.do(httptest.NewRequest("GET", "/webhooks", nil))
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "ev-42") || !strings.Contains(body, "HTTP 502") || strings.Contains(body, "secret-token") {
		t.Fatalf("GET /webhooks: %d\n%s", w.Code, body)
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no redeliver form")
	}
	ep := notify.EndpointID(u)
	w = e.post("/webhooks/"+ep+"/redeliver", url.Values{"csrf": {html.UnescapeString(m[1])}, "event": {"ev-42"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "event ev-42 queued again") {
		t.Fatalf("redeliver: %d\n%s", w.Code, w.Body.String())
	}
	info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetQueueInfo(notify.Queue)
	if err != nil || info.Pending != 1 {
		t.Fatalf("queue %+v, %v", info, err)
	}
	w = e.post("/webhooks/"+ep+"/redeliver", url.Values{"csrf": {html.UnescapeString(m[1])}, "event": {"nope"}})
	if w.Code != http.StatusConflict {
		t.Fatalf("unknown event: %d", w.Code)
	}
}
