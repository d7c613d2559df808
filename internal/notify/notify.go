// Package notify tells other systems what happened to payouts: a JSON POST
// to each configured endpoint (--notify-url, filtered by event type),
// signed the Standard Webhooks way under PAYOUT_NOTIFY_SECRET (webhook-id,
// webhook-timestamp, webhook-signature; two secrets during a rotation:
// webhooks.go), on every payout state change (the ledger writes the event
// with the change into the batch's outbox; the workers drain it: PayoutEvent),
// a batch that awaits approval, a batch that became final (with its summary
// and reconciliation), a payout that needs review, and the payout queue
// paused or resumed. Each endpoint's recent deliveries are kept in a
// bounded log in Redis, from which a person redelivers (log.go).
//
// Delivery never stands in the way of a payout. Emit only enqueues one
// Asynq task per URL on the queue [Queue], separate from the payout queue;
// the workers deliver them on a small server of their own (internal/worker)
// with a short timeout, and a receiver that is down only makes its tasks
// retry with exponential backoff and jitter, up to [MaxRetry] times (at
// least [DeliveryWindow], 24 hours), then archive (visible in the web UI,
// where they can be run again, and in the delivery log).
//
// Delivery is at least once: a POST whose answer was lost is sent again,
// and a fact recorded twice (a redelivered task) is emitted twice. Every
// event carries an id derived from the fact alone (type, batch, externalId
// and a discriminator), in the body and in [EventIDHeader], so a receiver
// drops what it has seen. Within [Retention] a second Emit of the same
// event to the same URL is refused by Asynq (same task ID) and never sent.
package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The queue contract of notifications.
const (
	Queue       = "notifications"  // Asynq queue of the deliveries
	TypeDeliver = "notify:deliver" // task type of one delivery to one URL
	// SecretEnv holds the HMAC key. It is read by the worker, which
	// signs when it delivers (a rotated secret applies to retries too).
	SecretEnv = "PAYOUT_NOTIFY_SECRET"
	// SignatureHeader carries "sha256=" + hex HMAC-SHA256(secret, body).
	SignatureHeader = "X-Payout-Signature"
	// EventIDHeader repeats the event's id for receivers that dedupe
	// before they parse.
	EventIDHeader   = "X-Payout-Event-Id"
	EventTypeHeader = "X-Payout-Event-Type"
	// Timeout bounds one delivery attempt (connect, send, answer).
	Timeout = 10 * time.Second
	// MaxRetry is how often a failed delivery is tried again; with
	// RetryDelay that rides out at least DeliveryWindow (24 hours) of
	// receiver outage.
	MaxRetry = 40
	// Retention keeps a delivered task, so that emitting the same event
	// again within it is refused by its task ID instead of sent again.
	Retention = 24 * time.Hour
)

// Type is the kind of an event.
type Type string

// Event types.
const (
	BatchAwaitingApproval Type = "batch_awaiting_approval"
	BatchFinal            Type = "batch_final"
	// BatchExpired: a batch's approval request expired; the reconciler
	// discarded it (every payout cancelled, nothing sent).
	BatchExpired      Type = "batch_expired"
	PayoutNeedsReview Type = "payout_needs_review"
	QueuePaused       Type = "queue_paused"
	QueueResumed      Type = "queue_resumed"
)

// Event is the JSON body of a notification.
type Event struct {
	// ID is the same for every emission of the same fact (see NewID):
	// a receiver keeps the ids it has seen and drops repeats.
	ID         string    `json:"id"`
	Type       Type      `json:"type"`
	Time       time.Time `json:"time"` // when it was emitted
	Batch      string    `json:"batch,omitempty"`
	ExternalID string    `json:"externalId,omitempty"`
	Queue      string    `json:"queue,omitempty"` // queue events: the queue
	// Sequence orders the events of one payout: 1, 2, 3... (payout
	// events only); OccurredAt is the Redis time of the state change.
	Sequence   int64         `json:"sequence,omitempty"`
	OccurredAt time.Time     `json:"occurredAt,omitzero"`
	Payout     *PayoutFields `json:"payout,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	// Summary of a batch_final event: the batch's totals by state and
	// outcome and its reconciliation with the file (report.Summary).
	Summary any `json:"summary,omitempty"`
}

// NewID derives an event id from the fact: its type, batch, externalId
// and a discriminator that tells apart two facts of the same kind about
// the same thing (a payout that needs review a second time after a
// resolution, a second pause).
func NewID(t Type, batch, externalID, discriminator string) string {
	h := sha256.New()
	for _, s := range []string{string(t), batch, externalID, discriminator} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// AwaitingApproval is the event of a batch held for approval. A batch is
// held once, so the batch id is the fact.
func AwaitingApproval(batch, reason string) Event {
	return Event{ID: NewID(BatchAwaitingApproval, batch, "", ""), Type: BatchAwaitingApproval, Batch: batch, Reason: reason}
}

// Expired is the event of a batch discarded because its approval request
// expired (reason: "approval expired after 7 days"). A batch expires
// once, so the batch id is the fact.
func Expired(batch, reason string) Event {
	return Event{ID: NewID(BatchExpired, batch, "", ""), Type: BatchExpired, Batch: batch, Reason: reason}
}

// Final is the event of a batch whose every payout is final; summary is
// its report summary. A batch becomes final once.
func Final(batch string, summary any) Event {
	return Event{ID: NewID(BatchFinal, batch, "", ""), Type: BatchFinal, Batch: batch, Summary: summary}
}

// NeedsReview is the event of a payout moved to needs_review; episode
// tells this move from a later one (the ledger's update time of the
// transition).
func NeedsReview(batch, externalID, reason, episode string) Event {
	return Event{ID: NewID(PayoutNeedsReview, batch, externalID, episode), Type: PayoutNeedsReview,
		Batch: batch, ExternalID: externalID, Reason: reason}
}

// Paused is the event of a queue paused; episode tells pauses apart (the
// time of the pause).
func Paused(queue, reason, episode string) Event {
	return Event{ID: NewID(QueuePaused, queue, "", episode), Type: QueuePaused, Queue: queue, Reason: reason}
}

// Resumed is the event of a queue resumed.
func Resumed(queue, reason, episode string) Event {
	return Event{ID: NewID(QueueResumed, queue, "", episode), Type: QueueResumed, Queue: queue, Reason: reason}
}

// Emitter enqueues the deliveries of events. A nil Emitter, or one without
// URLs and sinks, emits nothing.
type Emitter struct {
	client    *asynq.Client
	endpoints []Endpoint
	sinks     []Sink
}

// Sink is handed every event an Emitter emits, besides the endpoints: the
// mail to people (package mail) is one. Accept only enqueues; its error is
// reported with the endpoints' enqueue errors.
type Sink interface {
	Accept(ctx context.Context, ev Event) error
}

// NewEmitter returns an Emitter enqueuing on rdb to the endpoints specs
// (ParseEndpoint: URL, or TYPES=URL) and handing every event to sinks;
// nil when both are empty. A spec that does not parse is taken as a URL
// subscribed to everything (the CLI checks them first).
func NewEmitter(rdb redis.UniversalClient, specs []string, sinks ...Sink) *Emitter {
	if len(specs) == 0 && len(sinks) == 0 {
		return nil
	}
	e := &Emitter{client: asynq.NewClientFromRedisClient(rdb), sinks: append([]Sink(nil), sinks...)}
	for _, s := range specs {
		ep, err := ParseEndpoint(s)
		if err != nil {
			ep = Endpoint{URL: s}
		}
		e.endpoints = append(e.endpoints, ep)
	}
	return e
}

// CheckURL tells whether u is an absolute http or https URL.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("notify URL %q: want an absolute http:// or https:// URL with a host", Redact(u))
	}
	return nil
}

// Redact returns the scheme and host of a URL: what logs and errors show,
// since a receiver's path or query may hold a token.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(unparsable URL)"
	}
	return p.Scheme + "://" + p.Host + "/..."
}

// payload is the task payload of one delivery: the body is fixed when the
// event is emitted, so every retry sends the same bytes.
type payload struct {
	URL  string          `json:"url"`
	ID   string          `json:"id"`
	Type Type            `json:"type"`
	Body json.RawMessage `json:"body"`
}

// TaskID is the Asynq task ID of the delivery of event id to u.
func TaskID(id, u string) string {
	h := sha256.Sum256([]byte(u))
	return "notify:" + id + ":" + hex.EncodeToString(h[:])[:12]
}

// Emit enqueues ev's delivery to every URL. ev.Time defaults to now, and
// card numbers in ev.Reason are masked. An event already enqueued for a
// URL (same id) counts as done. It returns the enqueue errors, for the
// caller to log: the fact it reports is recorded already, and must not be
// undone because a notification could not be queued.
func (e *Emitter) Emit(ctx context.Context, ev Event) error {
	if e == nil || len(e.endpoints) == 0 && len(e.sinks) == 0 {
		return nil
	}
	if ev.ID == "" {
		return errors.New("notify: event without id")
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	ev.Reason = card.Scrub(ev.Reason)
	var errs []error
	for _, s := range e.sinks {
		errs = append(errs, s.Accept(ctx, ev))
	}
	if len(e.endpoints) == 0 {
		return errors.Join(errs...)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("notify: encode %s event: %w", ev.Type, err)
	}
	for _, ep := range e.endpoints {
		if !ep.Wants(ev.Type) {
			continue
		}
		err := enqueue(ctx, e.client, payload{URL: ep.URL, ID: ev.ID, Type: ev.Type, Body: body}, TaskID(ev.ID, ep.URL))
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			errs = append(errs, fmt.Errorf("notify: enqueue %s event %s for %s: %w", ev.Type, ev.ID, Redact(ep.URL), err))
		}
	}
	return errors.Join(errs...)
}

// enqueue queues one delivery under task id.
func enqueue(ctx context.Context, c *asynq.Client, p payload, id string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("notify: encode delivery: %w", err)
	}
	t := asynq.NewTask(TypeDeliver, b, asynq.Queue(Queue), asynq.TaskID(id),
		asynq.MaxRetry(MaxRetry), asynq.Retention(Retention), asynq.Timeout(Timeout+5*time.Second))
	_, err = c.EnqueueContext(ctx, t)
	return err
}

// Sign returns the value of SignatureHeader for body.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify tells whether header (the value of SignatureHeader) is the
// signature of body under secret. Receivers check it on the raw body,
// before parsing it, in constant time.
func Verify(secret string, body []byte, header string) bool {
	got, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok || secret == "" {
		return false
	}
	sig, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal(sig, m.Sum(nil))
}

// Deliverer is the Asynq handler of TypeDeliver: one POST, 2xx or retry.
type Deliverer struct {
	signer *Signer
	client *http.Client
	log    zerolog.Logger
	rdb    redis.UniversalClient // the delivery log's Redis; nil: no log
	// counter counts the attempts (NewDeliveryCounter); nil: not counted
	counter *prometheus.CounterVec
	now     func() time.Time
}

// ErrNoSecret is returned by NewDeliverer without a secret: nothing is
// ever sent unsigned.
var ErrNoSecret = errors.New("notify: no signing secret (set " + SecretEnv + ")")

// NewDeliverer returns the delivery handler signing with secret, the
// value of SecretEnv (NewSigner: one or two secrets).
func NewDeliverer(secret string, log zerolog.Logger) (*Deliverer, error) {
	if strings.TrimSpace(secret) == "" {
		return nil, ErrNoSecret
	}
	s, err := NewSigner(secret)
	if err != nil {
		return nil, err
	}
	return &Deliverer{
		signer: s,
		client: &http.Client{
			Timeout: Timeout,
			// A redirect is an answer that is not 2xx: retried, never
			// followed (a POST must not turn into a GET elsewhere).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: log,
		now: time.Now,
	}, nil
}

// Logging returns a copy of d that records every attempt in the delivery
// log on rdb (log.go).
func (d *Deliverer) Logging(rdb redis.UniversalClient) *Deliverer {
	c := *d
	c.rdb = rdb
	return &c
}

// ProcessTask delivers one event to one URL.
func (d *Deliverer) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.URL == "" {
		d.log.Error().Msg("malformed notification task archived")
		return fmt.Errorf("notify: malformed task: %w", asynq.SkipRetry)
	}
	log := d.log.With().Str("event", p.ID).Str("type", string(p.Type)).Str("url", Redact(p.URL)).Logger()
	status, err := d.post(ctx, p)
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, ok := asynq.GetMaxRetry(ctx)
	if !ok {
		maxRetry = MaxRetry
	}
	var next time.Time
	if err != nil && !errors.Is(err, asynq.SkipRetry) && retried < maxRetry {
		next = d.now().Add(RetryDelay(retried, err, t))
	}
	d.record(ctx, p, status, err == nil, next, log)
	switch {
	case err == nil:
		log.Debug().Str("status", status).Msg("notification delivered")
	default:
		log.Warn().Err(err).Msg("notification not delivered; will retry")
	}
	return err
}

// post makes one attempt; status is what the delivery log shows of it.
func (d *Deliverer) post(ctx context.Context, p payload) (status string, err error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, strings.NewReader(string(p.Body)))
	if err != nil {
		return "unusable URL", fmt.Errorf("notify: %s: %w", Redact(p.URL), asynq.SkipRetry)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payout-notify/2")
	if err := d.signer.Headers(req.Header, p.ID, string(p.Type), d.now(), p.Body); err != nil {
		return "not signed", err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// A *url.Error names the whole URL: keep its cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "no answer: " + err.Error(), fmt.Errorf("notify: POST %s: %w", Redact(p.URL), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	status = "HTTP " + strconv.Itoa(resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return status, fmt.Errorf("notify: POST %s: HTTP %d", Redact(p.URL), resp.StatusCode)
	}
	return status, nil
}

// Retry schedule: the delay before retry n+1 is 5 s doubling up to one
// hour, times a jitter between 0.8 and 1.2. MaxRetry retries span at
// least DeliveryWindow (TestRetriesSpanTheWindow).
const (
	retryBase      = 5 * time.Second
	retryCap       = time.Hour
	DeliveryWindow = 24 * time.Hour
)

// RetryDelay is the delay before retry n+1 of t: exponential with jitter.
// The jitter derives from the task and n, so the delivery log's "next
// try" is the time Asynq will run it.
func RetryDelay(n int, _ error, t *asynq.Task) time.Duration {
	d := retryBase
	for i := 0; i < n && d < retryCap; i++ {
		d *= 2
	}
	d = min(d, retryCap)
	h := fnv.New32a()
	if t != nil {
		_, _ = h.Write(t.Payload())
	}
	_, _ = h.Write([]byte{byte(n), byte(n >> 8)})
	return d * time.Duration(800+h.Sum32()%401) / 1000
}

// Drain delivers with d what is queued on rdb's notification queue, for up
// to within (payout run, whose embedded Redis ends with the command), and
// returns how many deliveries are left (0: all done, or the queue could
// not be read).
func Drain(ctx context.Context, rdb redis.UniversalClient, d *Deliverer, within time.Duration) int {
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 2, Queues: map[string]int{Queue: 1}, RetryDelayFunc: RetryDelay,
		ShutdownTimeout: Timeout, DelayedTaskCheckInterval: 200 * time.Millisecond, TaskCheckInterval: 200 * time.Millisecond,
		LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(TypeDeliver, d)
	if err := srv.Start(mux); err != nil {
		return 0
	}
	defer srv.Shutdown()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(within)
	for {
		info, err := insp.GetQueueInfo(Queue)
		if err != nil {
			return 0
		}
		left := info.Pending + info.Active + info.Scheduled + info.Retry
		if left == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left
		}
		time.Sleep(100 * time.Millisecond) // the server delivers meanwhile
	}
}
