package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// Two Standard Webhooks secrets: the new one and the old one of a
// rotation.
var (
	newSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the-new-key-of-32-bytes-long-abc"))
	oldSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the-old-key-of-32-bytes-long-xyz"))
	strange   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-key-no-one-configured-00000000"))
)

// TestStandardWebhooksSignature: the headers follow the convention, both
// secrets of a rotation sign (a receiver with either verifies), a
// receiver with another secret or a stale timestamp refuses, and the
// signature is over id.timestamp.body.
func TestStandardWebhooksSignature(t *testing.T) {
	s, err := NewSigner(newSecret + " " + oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"ev1","type":"payout.paid"}`)
	fresh := http.Header{}
	if err := s.Headers(fresh, "ev1", "payout.paid", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	if sigs := strings.Fields(fresh.Get(HeaderSignature)); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("webhook-signature %q: want two v1, signatures", fresh.Get(HeaderSignature))
	}
	stale := http.Header{}
	_ = s.Headers(stale, "ev1", "payout.paid", time.Now().Add(-time.Hour), body)
	for name, c := range map[string]struct {
		secret string
		h      http.Header
		body   []byte
		ok     bool
	}{
		"new secret":   {newSecret, fresh, body, true},
		"old secret":   {oldSecret, fresh, body, true},
		"other secret": {strange, fresh, body, false},
		"replayed":     {newSecret, stale, body, false},
		"other body":   {newSecret, fresh, []byte(`{"id":"ev1","type":"payout.failed"}`), false},
	} {
		if err := VerifyStandard(c.secret, c.body, c.h); (err == nil) != c.ok {
			t.Errorf("%s: verify = %v, want ok=%v", name, err, c.ok)
		}
	}
	if fresh.Get(HeaderID) != "ev1" || fresh.Get(HeaderTimestamp) == "" || !Verify("the-new-key-of-32-bytes-long-abc", body, fresh.Get(SignatureHeader)) {
		t.Errorf("headers %v", fresh)
	}
	for _, bad := range []string{"a b c", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := NewSigner(bad); !errors.Is(err, ErrSecret) {
			t.Errorf("NewSigner(%q) = %v, want ErrSecret", bad, err)
		}
	}
}

func TestSubscriptionsFilterByType(t *testing.T) {
	for _, c := range []struct {
		spec  string
		typ   Type
		wants bool
		err   bool
	}{
		{"https://a.example/h", "payout.paid", true, false},
		{"https://a.example/h?x=1", BatchFinal, true, false},
		{"payout.paid|payout.returned=https://a.example/h", "payout.paid", true, false},
		{"payout.paid|payout.returned=https://a.example/h", "payout.failed", false, false},
		{"payout.*|batch_*=https://a.example/h", BatchFinal, true, false},
		{"payout.*=https://a.example/h", QueuePaused, false, false},
		{"Payout Paid=https://a.example/h", "", false, true},
		{"payout.paid=ftp://a.example/h", "", false, true},
	} {
		ep, err := ParseEndpoint(c.spec)
		if (err != nil) != c.err {
			t.Errorf("ParseEndpoint(%q) error %v", c.spec, err)
			continue
		}
		if err == nil && ep.Wants(c.typ) != c.wants {
			t.Errorf("%q wants %s = %v", c.spec, c.typ, !c.wants)
		}
	}
}

// TestRetriesSpanTheWindow: even with the shortest jitter, MaxRetry
// retries keep a delivery going for DeliveryWindow (24 h); each delay is
// exponential up to the cap, with jitter, and the same for the same task
// and retry (the delivery log's next try).
func TestRetriesSpanTheWindow(t *testing.T) {
	var least time.Duration
	d := retryBase
	for n := 0; n < MaxRetry; n++ {
		least += d * 800 / 1000
		d = min(2*d, retryCap)
	}
	if least < DeliveryWindow {
		t.Fatalf("MaxRetry %d retries span at least %v, want %v", MaxRetry, least, DeliveryWindow)
	}
	task := asynq.NewTask(TypeDeliver, []byte(`{"id":"x"}`))
	seen := map[time.Duration]bool{}
	for n := 0; n < 12; n++ {
		got := RetryDelay(n, nil, task)
		base := min(retryBase<<n, retryCap)
		if got < base*8/10 || got > base*12/10 || got != RetryDelay(n, nil, task) {
			t.Errorf("retry %d: %v, want within 20%% of %v and stable", n, got, base)
		}
		seen[got] = true
	}
	other := asynq.NewTask(TypeDeliver, []byte(`{"id":"y"}`))
	same := 0
	for n := 0; n < 12; n++ {
		if RetryDelay(n, nil, other) == RetryDelay(n, nil, task) {
			same++
		}
	}
	if same > 2 {
		t.Errorf("two tasks share %d of 12 delays: no jitter", same)
	}
}

// TestDeliveryLogAndRedeliver: every attempt is recorded for its
// endpoint (attempts, last status, next try), the log is bounded, and a
// redelivery of one event or of the failed ones since a time sends the
// same body under the same webhook-id.
func TestDeliveryLogAndRedeliver(t *testing.T) {
	rdb := newRedis(t)
	var mu sync.Mutex
	fail := true
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get(HeaderID))
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	d, err := NewDeliverer(newSecret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	d = d.Logging(rdb)
	ctx := context.Background()
	for i := range 3 {
		id := "ev" + strconv.Itoa(i)
		body, _ := json.Marshal(Event{ID: id, Type: "payout.paid"})
		p, _ := json.Marshal(payload{URL: srv.URL, ID: id, Type: "payout.paid", Body: body})
		if err := d.ProcessTask(ctx, asynq.NewTask(TypeDeliver, p)); err == nil {
			t.Fatal("a 502 delivered")
		}
	}
	ep := EndpointID(srv.URL)
	got, err := Deliveries(ctx, rdb, ep, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("log = %+v, %v", got, err)
	}
	if g := got[0]; g.Attempts != 1 || g.OK || g.Status != "HTTP 502" || g.Next.IsZero() || g.Event != "ev2" {
		t.Fatalf("newest record %+v", g)
	}
	eps, _ := Endpoints(ctx, rdb)
	if len(eps) != 1 || eps[0].ID != ep || strings.Contains(eps[0].URL, srv.URL[len("http://"):]+"/x") {
		t.Fatalf("endpoints %+v", eps)
	}
	queued, err := Redeliver(ctx, rdb, ep, "ev1", time.Time{})
	if err != nil || len(queued) != 1 {
		t.Fatalf("redeliver one = %v, %v", queued, err)
	}
	queued, err = Redeliver(ctx, rdb, ep, "", time.Now().Add(-time.Minute))
	if err != nil || len(queued) != 3 {
		t.Fatalf("redeliver failed since = %v, %v", queued, err)
	}
	if _, err := Redeliver(ctx, rdb, ep, "nope", time.Time{}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown event: %v", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if left := Drain(ctx, rdb, d, 20*time.Second); left != 0 {
		t.Fatalf("%d redeliveries left", left)
	}
	got, _ = Deliveries(ctx, rdb, ep, 10)
	for _, g := range got {
		if !g.OK || g.Attempts != 2 && !(g.Event == "ev1" && g.Attempts == 3) {
			t.Errorf("after redelivery %+v", g)
		}
	}
}
