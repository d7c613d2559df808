package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/operator"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// TestRedeliver: a failed delivery is queued again by one event or by
// time, audited with who did it; an unknown endpoint or event, or a
// command without what to redeliver, is refused.
func TestRedeliver(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	d, err := notify.NewDeliverer("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"id": "ev1"})
	p, _ := json.Marshal(map[string]any{"url": down.URL, "id": "ev1", "type": "payout.paid", "body": json.RawMessage(body)})
	if d.Logging(rdb).ProcessTask(ctx, asynq.NewTask(notify.TypeDeliver, p)) == nil {
		t.Fatal("a 503 delivered")
	}
	ep := notify.EndpointID(down.URL)
	acts := operator.New(rdb, nil, zerolog.Nop()).As(access.Principal{Name: "alice", Roles: access.Of(access.Operator)})
	viewer := operator.New(rdb, nil, zerolog.Nop()).As(access.Principal{Name: "vic", Roles: access.Of(access.Viewer)})
	if _, err := viewer.Redeliver(ctx, operator.Redelivery{Endpoint: ep, Event: "ev1", By: "vic"}); !errors.Is(err, operator.ErrForbidden) ||
		err.Error() != "not redelivered: redelivering webhook events needs the operator role; vic holds viewer" {
		t.Errorf("a viewer's redeliver: %v, want a refusal for the operator role", err)
	}
	for name, c := range map[string]struct {
		q    operator.Redelivery
		kind error
	}{
		"no operator":      {operator.Redelivery{Endpoint: ep, Event: "ev1"}, operator.ErrIncomplete},
		"nothing asked":    {operator.Redelivery{Endpoint: ep, By: "alice"}, operator.ErrIncomplete},
		"unknown endpoint": {operator.Redelivery{Endpoint: "0123456789ab", Event: "ev1", By: "alice"}, operator.ErrNotFound},
		"unknown event":    {operator.Redelivery{Endpoint: ep, Event: "ev9", By: "alice"}, operator.ErrNotFound},
	} {
		if _, err := acts.Redeliver(ctx, c.q); !errors.Is(err, c.kind) || !errors.Is(err, operator.ErrRefused) {
			t.Errorf("%s: %v, want %v", name, err, c.kind)
		}
	}
	r, err := acts.Redeliver(ctx, operator.Redelivery{Endpoint: ep, Event: "ev1", By: "alice", Note: "receiver fixed"})
	if err != nil || r.Unrecorded != nil || len(r.Events) != 1 || !strings.Contains(r.Words(), "event ev1 queued again") {
		t.Fatalf("redeliver one: %+v, %v", r, err)
	}
	r, err = acts.Redeliver(ctx, operator.Redelivery{Endpoint: ep, Since: time.Now().Add(-time.Hour), By: "alice"})
	if err != nil || len(r.Events) != 1 {
		t.Fatalf("redeliver failed since: %+v, %v", r, err)
	}
	var audit []ledger.AuditEntry
	ledger.New(rdb).Audit().Each(ctx, "", "", func(e ledger.AuditEntry) error { audit = append(audit, e); return nil })
	if len(audit) != 2 || audit[0].Actor != "alice" || audit[0].To != "redelivered" {
		t.Fatalf("audit %+v", audit)
	}
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(notify.Queue)
	if err != nil || info.Pending != 2 {
		t.Fatalf("queue %+v, %v", info, err)
	}
}
