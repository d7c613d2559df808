package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/queue"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// fakeSender records what it sends; fail decides the error of a send.
type fakeSender struct {
	mu   sync.Mutex
	sent []sent
	fail func(to string) error
}

type sent struct {
	to  string
	msg Message
}

func (f *fakeSender) Send(_ context.Context, to *netmail.Address, m Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(to.Address); err != nil {
			return err
		}
	}
	f.sent = append(f.sent, sent{to.Address, m})
	return nil
}

func (f *fakeSender) to() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.sent {
		out = append(out, s.to)
	}
	return out
}

// fakeQueue records the mail tasks, refusing a task ID it holds.
type fakeQueue struct {
	mu    sync.Mutex
	tasks map[string]queue.MailTask
}

func (q *fakeQueue) AddMail(_ context.Context, t queue.MailTask) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.tasks[t.ID]; ok {
		return false, nil
	}
	q.tasks[t.ID] = t
	return true, nil
}

// take removes and returns the tasks of type typ.
func (q *fakeQueue) take(typ string) []queue.MailTask {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queue.MailTask
	for id, t := range q.tasks {
		if t.Type == typ {
			out = append(out, t)
			delete(q.tasks, id)
		}
	}
	return out
}

type fixture struct {
	rdb    *redis.Client
	l      *ledger.Ledger
	q      *fakeQueue
	sender *fakeSender
	m      *Mailer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	rc, err := ParseRecipients("recipients", strings.NewReader(goodRecipients))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{rdb: rdb, l: ledger.New(rdb), q: &fakeQueue{tasks: map[string]queue.MailTask{}}, sender: &fakeSender{}}
	f.m, err = New(Config{Redis: rdb, Queue: f.q, Sender: f.sender, Recipients: rc, ConsoleURL: "https://payout.example.com/",
		Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// seed registers batch id (loaded by alice under four-eyes) with amounts,
// held for approval when held.
func (f *fixture) seed(t *testing.T, id string, held bool, amounts ...string) {
	t.Helper()
	ctx := context.Background()
	total := money.Zero
	var ps []ledger.NewPayout
	for i, a := range amounts {
		amt := money.MustParse(a)
		total = total.Add(amt)
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("%s-%d", id, i+1), Amount: amt, Destination: "card 411111******1111"})
	}
	if _, _, err := f.l.BeginBatch(ctx, ledger.Batch{ID: id, File: id + ".csv", LoadedAt: time.Now(), Rows: int64(len(ps)), Total: total,
		Scale: 2, LoadedBy: "alice", FourEyes: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Register(ctx, id, ps, 2); err != nil {
		t.Fatal(err)
	}
	var err error
	if held {
		err = f.l.Controls().HoldBatch(ctx, id, "approval required")
	} else {
		err = f.l.FinishBatch(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// run hands ev to the Sink and runs the task it enqueued.
func (f *fixture) run(t *testing.T, ev notify.Event) error {
	t.Helper()
	ctx := context.Background()
	if err := NewSink(f.q).Accept(ctx, ev); err != nil {
		t.Fatal(err)
	}
	tasks := f.q.take(TypeEvent)
	if len(tasks) != 1 {
		t.Fatalf("%d event tasks", len(tasks))
	}
	return f.m.Handle(ctx, TypeEvent, tasks[0].Payload)
}

// TestOneMailPerPersonPerEvent: the approvers of a held batch get one mail
// each, the maker (under four-eyes) none, however often the event comes.
func TestOneMailPerPersonPerEvent(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "held", true, "10.50", "10.07")
	ev := notify.AwaitingApproval("held", "approval required")
	for range 3 {
		if err := f.run(t, ev); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(f.sender.to(), ","); got != "ann@example.com,bob@example.com" {
		t.Fatalf("sent to %s", got)
	}
	msg := f.sender.sent[0].msg
	if !strings.Contains(msg.Text, "20.57") || !strings.Contains(msg.Text, "https://payout.example.com/batches/held/approve") {
		t.Fatalf("text:\n%s", msg.Text)
	}
}

// TestFailedSendIsRetried: a send that provably failed is sent again by
// the retry (to that person only); one that may have reached the server
// is not (at most once).
func TestFailedSendIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantErr   bool
		wantSends string
	}{
		{"not sent", ErrNotSent, true, "ann@example.com,bob@example.com"},
		{"maybe sent", ErrMaybeSent, false, "ann@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(t, "held", true, "1.00")
			failing := true
			f.sender.fail = func(to string) error {
				if to == "bob@example.com" && failing {
					return fmt.Errorf("%w: 421 try later", tc.err)
				}
				return nil
			}
			ev := notify.AwaitingApproval("held", "approval required")
			err := f.run(t, ev)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrNotSent)) {
				t.Fatalf("first run: %v", err)
			}
			failing = false
			// The retry: the same task again (Asynq retries it; the Sink's
			// task ID would refuse a second Accept within a day).
			p, _ := json.Marshal(eventTask{ID: ev.ID, Type: ev.Type, Batch: ev.Batch, Reason: ev.Reason})
			if err := f.m.Handle(context.Background(), TypeEvent, p); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.sender.to(), ","); got != tc.wantSends {
				t.Fatalf("sent to %s, want %s", got, tc.wantSends)
			}
		})
	}
}

// TestFinalGoesToTheMaker: the person who loaded the batch gets its
// figures per state, with decimals.
func TestFinalGoesToTheMaker(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "done", false, "10.50", "0.07")
	if err := f.run(t, notify.Final("done", nil)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.sender.to(), ","); got != "alice@example.com" {
		t.Fatalf("sent to %s", got)
	}
	text := f.sender.sent[0].msg.Text
	for _, w := range []string{"10.57", "queued", "https://payout.example.com/batches/done"} {
		if !strings.Contains(text, w) {
			t.Errorf("%q missing:\n%s", w, text)
		}
	}
}

// TestReviewDigest: payouts needing review make one digest per operator
// per window, listing each with its amount; the next window starts empty.
func TestReviewDigest(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "rev", false, "10.50", "0.07", "3.00")
	for i, ext := range []string{"rev-1", "rev-2", "rev-3"} {
		if err := f.run(t, notify.NeedsReview("rev", ext, "no answer from the PSP", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.sender.to()) != 0 {
		t.Fatal("a mail per payout")
	}
	tasks := f.q.take(TypeDigest)
	if len(tasks) != 1 {
		t.Fatalf("%d digest tasks for one window", len(tasks))
	}
	var d digestTask
	_ = json.Unmarshal(tasks[0].Payload, &d)
	for range 2 { // a redelivered digest sends nothing more
		if err := f.m.Handle(context.Background(), TypeDigest, tasks[0].Payload); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(f.sender.to(), ","); got != "ops@example.com" {
		t.Fatalf("sent to %s", got)
	}
	m := f.sender.sent[0].msg
	for _, w := range []string{"3 payouts need review", "10.50", "0.07", "3.00", "/batches/rev/payouts/rev-2", "411111******1111"} {
		if !strings.Contains(m.Subject+m.Text, w) {
			t.Errorf("%q missing:\n%s\n%s", w, m.Subject, m.Text)
		}
	}
	if n := f.rdb.ZCard(context.Background(), keys.MailReview()).Val(); n != 0 {
		t.Errorf("%d payouts left in the digest", n)
	}
	if left := f.q.take(TypeDigest); len(left) != 0 {
		t.Errorf("a next digest scheduled with nothing in it: %v", left)
	}
}

// TestMalformedTasksArePermanent: no retry helps them.
func TestMalformedTasksArePermanent(t *testing.T) {
	f := newFixture(t)
	for _, typ := range []string{TypeEvent, TypeDigest, TypeEndpoint, "mail:unknown"} {
		if err := f.m.Handle(context.Background(), typ, []byte("{")); !errors.Is(err, ErrPermanent) {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// TestEndpointFailure: the owners of an endpoint get one mail per
// episode.
func TestEndpointFailure(t *testing.T) {
	f := newFixture(t)
	fail := EndpointFailure{Endpoint: "https://hooks.example.com/payout", Episode: "e1", Failures: 5, Since: time.Now(), LastError: "HTTP 500", Path: "/webhooks/1"}
	for range 2 {
		if err := EnqueueEndpointFailure(context.Background(), f.q, fail); err != nil {
			t.Fatal(err)
		}
	}
	tasks := f.q.take(TypeEndpoint)
	if len(tasks) != 1 {
		t.Fatalf("%d tasks", len(tasks))
	}
	for range 2 {
		if err := f.m.Handle(context.Background(), TypeEndpoint, tasks[0].Payload); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(f.sender.to(), ","); got != "dev@example.com,alice@example.com" {
		t.Fatalf("sent to %s", got)
	}
	if !strings.Contains(f.sender.sent[0].msg.Text, "https://payout.example.com/webhooks/1") {
		t.Fatal(f.sender.sent[0].msg.Text)
	}
}
