package worker

import (
	"context"
	"encoding/json"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/sandbox"
	"github.com/rs/zerolog"
)

// hangingReceiver holds every POST until released, then takes them.
type hangingReceiver struct {
	release  chan struct{}
	inflight atomic.Int32
	mu       sync.Mutex
	events   map[string]notify.Event // verified events by id
}

func (rc *hangingReceiver) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	rc.inflight.Add(1)
	defer rc.inflight.Add(-1)
	select {
	case <-rc.release:
	case <-r.Context().Done():
		return
	}
	body, _ := io.ReadAll(r.Body)
	var ev notify.Event
	if !notify.Verify("notify-secret", body, r.Header.Get(notify.SignatureHeader)) || json.Unmarshal(body, &ev) != nil {
		w.WriteHeader(nethttp.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.events[ev.ID] = ev
	rc.mu.Unlock()
}

func (rc *hangingReceiver) event(id string) (notify.Event, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ev, ok := rc.events[id]
	return ev, ok
}

// TestNotificationsNeverDelayPayouts: deliveries to a receiver that hangs
// fill the notification server, and the payouts drain all the same; the
// payout that needs review is notified once the receiver answers, with
// the id derived from the ledger's transition, and so is a pause.
func TestNotificationsNeverDelayPayouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := &hangingReceiver{release: make(chan struct{}), events: map[string]notify.Event{}}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	var once sync.Once
	release := func() { once.Do(func() { close(rc.release) }) }
	defer release()

	cfg := fastConfig()
	cfg.Concurrency = 2
	h := newHarness(t, cfg, sandbox.Config{})
	d, err := notify.NewDeliverer("notify-secret", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	em := notify.NewEmitter(h.rdb, []string{recv.URL})
	h.cfg.Notify = NotifyConfig{Emitter: em, Deliverer: d}
	// A backlog of notifications, more than the delivery server runs at once.
	for i := range 10 {
		if err := em.Emit(ctx, notify.AwaitingApproval("old-"+strconv.Itoa(i), "approval required")); err != nil {
			t.Fatal(err)
		}
	}
	ids := h.add(visa, visa, visa, visa, visa, visa, visa, visa)
	key := keys.Payout(h.batch, ids[0])
	sealed, _ := h.rdb.HGet(ctx, key, "sealed").Result()
	h.rdb.HSet(ctx, key, "sealed", sealed[:len(sealed)-4]+"AAAA") // this one needs review
	h.start()
	h.waitFor("deliveries hanging", 5*time.Second, func() bool { return rc.inflight.Load() >= 2 })
	c := h.waitFinal(5 * time.Second)
	if c.Rows[lifecycle.Created] != int64(len(ids)-1) || c.Rows[lifecycle.NeedsReview] != 1 {
		t.Fatalf("counts %+v", c.Rows)
	}
	if rc.inflight.Load() < 2 {
		t.Fatal("the deliveries stopped hanging before the payouts drained: the test proves nothing")
	}

	release()
	p := h.payout(ids[0])
	want := notify.NeedsReview(h.batch, ids[0], "", strconv.FormatInt(p.UpdatedAt.UnixMilli(), 10)).ID
	var ev notify.Event
	h.waitFor("the needs_review event", 10*time.Second, func() bool {
		var ok bool
		ev, ok = rc.event(want)
		return ok
	})
	if ev.Type != notify.PayoutNeedsReview || ev.Batch != h.batch || ev.ExternalID != ids[0] || ev.Reason == "" {
		t.Fatalf("event %+v", ev)
	}

	// A refusal the recheck repeats and a second worker confirms.
	h.force(sandbox.Force{Status: 401, Op: sandbox.OpWithdrawalCreate})
	h.force(sandbox.Force{Status: 401, Op: sandbox.OpWithdrawalStatus})
	h.authFaultElsewhere()
	h.batch = "second"
	h.add(visa)
	h.waitFor("queue paused", 10*time.Second, h.paused)
	h.waitFor("the queue_paused event", 10*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, ev := range rc.events {
			if ev.Type == notify.QueuePaused && ev.Queue == "payouts" && ev.Reason != "" {
				return true
			}
		}
		return false
	})
}
