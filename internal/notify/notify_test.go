package notify

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

const secret = "s3cret-for-tests"

func newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// received is what a test receiver saw of one POST.
type received struct {
	id, sig  string
	body     []byte
	verified bool
}

// receiver records POSTs; answer decides the status of each (n counts
// from 1).
type receiver struct {
	mu     sync.Mutex
	got    []received
	answer func(n int) int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig := r.Header.Get(SignatureHeader)
	rc.mu.Lock()
	rc.got = append(rc.got, received{id: r.Header.Get(EventIDHeader), sig: sig, body: body, verified: Verify(secret, body, sig)})
	n := len(rc.got)
	rc.mu.Unlock()
	status := http.StatusNoContent
	if rc.answer != nil {
		status = rc.answer(n)
	}
	w.WriteHeader(status)
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"x"}`)
	h := Sign(secret, body)
	if !strings.HasPrefix(h, "sha256=") || !Verify(secret, body, h) {
		t.Fatalf("own signature %q does not verify", h)
	}
	for name, c := range map[string]struct {
		secret string
		body   string
		header string
	}{
		"other body":   {secret, `{"id":"y"}`, h},
		"other secret": {"other", string(body), h},
		"no prefix":    {secret, string(body), strings.TrimPrefix(h, "sha256=")},
		"not hex":      {secret, string(body), "sha256=zz"},
		"empty secret": {"", string(body), Sign("", body)},
		"empty header": {secret, string(body), ""},
	} {
		if Verify(c.secret, []byte(c.body), c.header) {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestEventIDsNameTheFact: the same fact gives the same id, another fact
// another one.
func TestEventIDsNameTheFact(t *testing.T) {
	if AwaitingApproval("b1", "x").ID != AwaitingApproval("b1", "y").ID {
		t.Error("awaiting approval: the reason changed the id")
	}
	if Final("b1", nil).ID != Final("b1", map[string]int{"rows": 1}).ID {
		t.Error("final: the summary changed the id")
	}
	ids := map[string]string{}
	for name, ev := range map[string]Event{
		"awaiting b1":    AwaitingApproval("b1", ""),
		"awaiting b2":    AwaitingApproval("b2", ""),
		"final b1":       Final("b1", nil),
		"review E1 t1":   NeedsReview("b1", "E1", "r", "1"),
		"review E1 t2":   NeedsReview("b1", "E1", "r", "2"),
		"review E2 t1":   NeedsReview("b1", "E2", "r", "1"),
		"paused p 1":     Paused("payouts", "", "1"),
		"resumed p 1":    Resumed("payouts", "", "1"),
		"paused p 2":     Paused("payouts", "", "2"),
		"batch/ext swap": NeedsReview("b1E1", "", "r", "1"),
	} {
		if other, ok := ids[ev.ID]; ok {
			t.Errorf("%s and %s share id %s", name, other, ev.ID)
		}
		ids[ev.ID] = name
	}
}

// TestEmitOnceSignedPOST: emitting the same event twice queues one
// delivery per URL on the notifications queue; the delivery POSTs the
// JSON body with a signature that verifies and the event id, and card
// numbers in the reason are masked. A nil Emitter emits nothing.
func TestEmitOnceSignedPOST(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var none *Emitter
	if err := none.Emit(ctx, Final("b", nil)); err != nil || NewEmitter(nil, nil) != nil {
		t.Fatalf("nil emitter: %v", err)
	}

	em := NewEmitter(rdb, []string{srv.URL + "/a", srv.URL + "/b"})
	ev := NeedsReview("b1", "E1", "PSP said: card 4111111111111111 refused", "1700000000000")
	for range 2 {
		if err := em.Emit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	tasks, err := insp.ListPendingTasks(Queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d tasks queued for 2 URLs and 2 emits of one event, want 2", len(tasks))
	}
	d, err := NewDeliverer(secret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tasks {
		if ti.MaxRetry != MaxRetry || ti.Queue != Queue {
			t.Errorf("task %s: max retry %d, queue %s", ti.ID, ti.MaxRetry, ti.Queue)
		}
		if err := d.ProcessTask(ctx, asynq.NewTask(ti.Type, ti.Payload)); err != nil {
			t.Fatal(err)
		}
	}
	got := rc.all()
	if len(got) != 2 {
		t.Fatalf("%d POSTs, want 2", len(got))
	}
	for _, r := range got {
		if !r.verified || r.id != ev.ID {
			t.Errorf("POST: verified %v, id %q want %q", r.verified, r.id, ev.ID)
		}
		var back Event
		if err := json.Unmarshal(r.body, &back); err != nil {
			t.Fatal(err)
		}
		if back.ID != ev.ID || back.Type != PayoutNeedsReview || back.Batch != "b1" || back.ExternalID != "E1" || back.Time.IsZero() {
			t.Errorf("body %s", r.body)
		}
		if strings.Contains(string(r.body), "4111111111111111") {
			t.Errorf("a card number went out: %s", r.body)
		}
	}
	if _, err := NewDeliverer("", zerolog.Nop()); err == nil {
		t.Error("a deliverer without a secret")
	}
}

// TestReceiverDownThenUp is the done-when of the issue: the receiver is
// down (nothing listens), then up but its first answer is lost (a 500
// after it took the event); Asynq retries with backoff until a 2xx, and
// every POST carries the same event id and body with a signature that
// verifies, so the receiver can drop the repeat.
func TestReceiverDownThenUp(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused

	em := NewEmitter(rdb, []string{"http://" + addr + "/hook?token=t0p"})
	ev := Final("b1", map[string]any{"reconciled": true, "rows": 3})
	if err := em.Emit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	d, err := NewDeliverer(secret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 1, Queues: map[string]int{Queue: 1},
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 100 * time.Millisecond },
		DelayedTaskCheckInterval: 50 * time.Millisecond, TaskCheckInterval: 50 * time.Millisecond,
		LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(TypeDeliver, d)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	id := TaskID(ev.ID, "http://"+addr+"/hook?token=t0p")
	info := waitTask(t, insp, id, "retried while the receiver is down", func(ti *asynq.TaskInfo) bool { return ti.Retried >= 2 })
	if strings.Contains(info.LastErr, "t0p") {
		t.Errorf("the error shows the URL's token: %s", info.LastErr)
	}

	rc := &receiver{answer: func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError // took it, but the answer says otherwise
		}
		return http.StatusOK
	}}
	up, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	hs := &http.Server{Handler: rc, ReadHeaderTimeout: time.Second}
	go func() { _ = hs.Serve(up) }()
	defer hs.Close()
	waitTask(t, insp, id, "delivered after the outage", func(ti *asynq.TaskInfo) bool { return ti.State == asynq.TaskStateCompleted })

	got := rc.all()
	if len(got) != 2 {
		t.Fatalf("%d POSTs after the receiver came up, want 2 (one refused, one accepted)", len(got))
	}
	for i, r := range got {
		if r.id != ev.ID || !r.verified || string(r.body) != string(got[0].body) {
			t.Errorf("POST %d: id %q (want %q), verified %v, same body %v", i+1, r.id, ev.ID, r.verified, string(r.body) == string(got[0].body))
		}
	}
	var back Event
	if err := json.Unmarshal(got[0].body, &back); err != nil || back.ID != ev.ID || back.Type != BatchFinal {
		t.Fatalf("body %s: %v", got[0].body, err)
	}
	// The same fact emitted again (a spool run that died before marking
	// the batch reported) is refused by the retained task: no third POST.
	if err := em.Emit(ctx, Final("b1", nil)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.all()); n != 2 {
		t.Errorf("%d POSTs after a repeated emit, want still 2", n)
	}
}

func waitTask(t *testing.T, insp *asynq.Inspector, id, what string, cond func(*asynq.TaskInfo) bool) *asynq.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ti, err := insp.GetTaskInfo(Queue, id)
		if err == nil && cond(ti) {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s (task %+v, %v)", what, ti, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
