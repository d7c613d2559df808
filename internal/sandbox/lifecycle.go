package sandbox

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/card"
)

// FailReasons are the reasons a failed order gives, one drawn per failed
// order from the seeded source.
var FailReasons = []string{
	"card blocked by issuer",
	"account closed",
	"card expired",
	"recipient bank rejected the transfer",
	"recipient limit exceeded",
}

// ReturnReasons are the reasons a returned order gives, one drawn per
// returned order from the seeded source.
var ReturnReasons = []string{
	"beneficiary account closed",
	"refunded at the recipient's request",
	"chargeback by the card issuer",
}

// callbackTick is how often the callback loop looks for status changes
// and due deliveries.
const callbackTick = 10 * time.Millisecond

// callbackTimeout bounds one delivery attempt.
const callbackTimeout = 5 * time.Second

func lifecycleDefaults(cfg Config) Config {
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	cfg.PaidStatus = orDefault(strings.TrimSpace(cfg.PaidStatus), DefaultPaidStatus)
	cfg.FailedStatus = orDefault(strings.TrimSpace(cfg.FailedStatus), DefaultFailedStatus)
	cfg.ReturnedStatus = orDefault(strings.TrimSpace(cfg.ReturnedStatus), DefaultReturnedStatus)
	cfg.SettleAfter = max(cfg.SettleAfter, 0)
	cfg.PFail = min(max(cfg.PFail, 0), 1)
	cfg.PCallbackDup = min(max(cfg.PCallbackDup, 0), 1)
	cfg.CallbackDelay = max(cfg.CallbackDelay, 0)
	if cfg.CallbackRetries == 0 {
		cfg.CallbackRetries = DefaultCallbackRetries
	}
	cfg.CallbackRetries = max(cfg.CallbackRetries, 0)
	if cfg.CallbackBackoff <= 0 {
		cfg.CallbackBackoff = DefaultCallbackBackoff
	}
	if cfg.CallbackConcurrency <= 0 {
		cfg.CallbackConcurrency = DefaultCallbackConcurrency
	}
	if cfg.SettleAfter == 0 {
		cfg.CallbackURL = "" // no status ever changes
	}
	return cfg
}

// decideFateLocked draws, at creation, how a withdrawal order ends.
func (s *Server) decideFateLocked(o *Order) {
	o.FinalStatus, o.FinalReason, o.FinalAt = StatusCreated, "", time.Time{}
	o.ReturnAt, o.ReturnStatus, o.ReturnReason = time.Time{}, "", ""
	if s.cfg.SettleAfter <= 0 {
		return
	}
	o.FinalAt = o.CreatedAt.Add(s.cfg.SettleAfter)
	o.FinalStatus = s.cfg.PaidStatus
	if s.cfg.PFail > 0 && s.lifeRng.Float64() < s.cfg.PFail {
		o.FinalStatus = s.cfg.FailedStatus
		o.FinalReason = FailReasons[s.lifeRng.IntN(len(FailReasons))]
		return
	}
	if s.cfg.PReturn > 0 && s.lifeRng.Float64() < s.cfg.PReturn {
		o.ReturnAt, o.ReturnStatus = o.FinalAt.Add(s.cfg.ReturnAfter), s.cfg.ReturnedStatus
		o.ReturnReason = ReturnReasons[s.lifeRng.IntN(len(ReturnReasons))]
	}
}

// processingAt is when the order turns Processing (zero: never).
func (o Order) processingAt() time.Time {
	if o.FinalAt.IsZero() {
		return time.Time{}
	}
	return o.CreatedAt.Add(o.FinalAt.Sub(o.CreatedAt) / 2)
}

// at returns the order as it is at now: its Status and StatusReason
// follow the lifecycle decided at creation.
func (o Order) at(now time.Time) Order {
	if o.Kind != "withdrawal" || o.FinalAt.IsZero() {
		return o
	}
	switch {
	case !o.ReturnAt.IsZero() && !now.Before(o.ReturnAt):
		o.Status, o.StatusReason, o.ReturnedAt = o.ReturnStatus, o.ReturnReason, o.ReturnAt.UTC().Format(time.RFC3339)
	case !now.Before(o.FinalAt):
		o.Status, o.StatusReason = o.FinalStatus, o.FinalReason
	case !now.Before(o.processingAt()):
		o.Status = StatusProcessing
	default:
		o.Status = StatusCreated
	}
	return o
}

// LifecycleJSON is the lifecycle and callback configuration as the admin
// API shows it (GET /sandbox/lifecycle): durations as Go duration text, the
// callback URL without its userinfo, never the secret.
type LifecycleJSON struct {
	SettleAfter   string  `json:"settleAfter"`
	PFail         float64 `json:"pFail"`
	PaidStatus    string  `json:"paidStatus"`
	FailedStatus  string  `json:"failedStatus"`
	CallbackURL   string  `json:"callbackUrl"`
	PCallbackDup  float64 `json:"pCallbackDup"`
	CallbackDelay string  `json:"callbackDelay"`
}

// Lifecycle returns the lifecycle and callback configuration.
func (s *Server) Lifecycle() LifecycleJSON {
	return LifecycleJSON{
		SettleAfter:   s.cfg.SettleAfter.String(),
		PFail:         s.cfg.PFail,
		PaidStatus:    s.cfg.PaidStatus,
		FailedStatus:  s.cfg.FailedStatus,
		CallbackURL:   redactURL(s.cfg.CallbackURL),
		PCallbackDup:  s.cfg.PCallbackDup,
		CallbackDelay: s.cfg.CallbackDelay.String(),
	}
}

// redactURL keeps scheme, host and path: userinfo and query may hold
// credentials.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// callbackBody is the JSON POSTed to Config.CallbackURL.
type callbackBody struct {
	ExternalID   string `json:"externalId"`
	OrderID      string `json:"pspDepositOrderID"`
	Status       string `json:"status"`
	StatusReason string `json:"statusReason,omitempty"`
}

// event is a status change to announce: stage 1 Processing, 2 final, 3
// returned after paid.
type event struct {
	due   time.Time
	seq   uint64
	order int // index in Server.orders
	stage int
}

// delivery is one POST of a callback (a duplicate is a second delivery).
type delivery struct {
	due  time.Time
	seq  uint64
	body callbackBody
}

type timed interface{ key() (time.Time, uint64) }

func (e event) key() (time.Time, uint64)    { return e.due, e.seq }
func (d delivery) key() (time.Time, uint64) { return d.due, d.seq }

// queue is a min-heap by due time, then sequence.
type queue[T timed] []T

func (q queue[T]) Len() int { return len(q) }
func (q queue[T]) Less(i, j int) bool {
	ti, si := q[i].key()
	tj, sj := q[j].key()
	if !ti.Equal(tj) {
		return ti.Before(tj)
	}
	return si < sj
}
func (q queue[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue[T]) Push(x any)   { *q = append(*q, x.(T)) }
func (q *queue[T]) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// popDue removes and returns the entries due at now, earliest first.
func popDue[T timed](q *queue[T], now time.Time) []T {
	var out []T
	for q.Len() > 0 {
		if due, _ := (*q)[0].key(); due.After(now) {
			break
		}
		out = append(out, heap.Pop(q).(T))
	}
	return out
}

// callbacks is the state of the callback sender; its queues and counters
// are guarded by Server.mu.
type callbacks struct {
	enabled    bool
	rng        *mrand.Rand // duplicate and delay draws
	seq        uint64
	gen        uint64 // bumped by Reset: deliveries of an older generation count nowhere
	events     queue[event]
	deliveries queue[delivery]
}

func (c *callbacks) resetLocked(seed int64) {
	c.rng = mrand.New(mrand.NewPCG(uint64(seed), 0xca11))
	c.gen++
	c.events, c.deliveries = nil, nil
}

// scheduleLocked queues the status changes of a new withdrawal order.
func (c *callbacks) scheduleLocked(o Order, idx int) {
	if !c.enabled || o.FinalAt.IsZero() {
		return
	}
	c.seq++
	heap.Push(&c.events, event{due: o.processingAt(), seq: c.seq, order: idx, stage: 1})
	c.seq++
	heap.Push(&c.events, event{due: o.FinalAt, seq: c.seq, order: idx, stage: 2})
	if !o.ReturnAt.IsZero() {
		c.seq++
		heap.Push(&c.events, event{due: o.ReturnAt, seq: c.seq, order: idx, stage: 3})
	}
}

// RunCallbacks sends the callbacks of status changes (Config.CallbackURL)
// until ctx is done or the server shuts down, then waits for the deliveries
// in progress, which are cancelled. Serve runs it; a caller of Handler
// that wants callbacks runs it itself. Without a callback URL it returns
// at once.
func (s *Server) RunCallbacks(ctx context.Context) {
	if s.cfg.CallbackURL == "" {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	client := &http.Client{Timeout: callbackTimeout}
	sem := make(chan struct{}, s.cfg.CallbackConcurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(callbackTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due, gen := s.dueDeliveries()
		for _, d := range due {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.deliver(ctx, client, d, gen)
			}()
		}
	}
}

// dueDeliveries turns the status changes due by the clock into deliveries
// (duplicated and delayed as configured) and returns the deliveries due.
func (s *Server) dueDeliveries() ([]delivery, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.cb
	now := s.clock.Now()
	for _, e := range popDue(&c.events, now) {
		o := s.orders[e.order].at(e.due)
		body := callbackBody{ExternalID: o.ExternalID, OrderID: o.PSPOrderID, Status: o.Status, StatusReason: o.StatusReason}
		n := 1
		if s.cfg.PCallbackDup > 0 && c.rng.Float64() < s.cfg.PCallbackDup {
			n = 2
		}
		for range n {
			due := e.due
			if s.cfg.CallbackDelay > 0 {
				due = due.Add(time.Duration(c.rng.Int64N(int64(s.cfg.CallbackDelay) + 1)))
			}
			c.seq++
			heap.Push(&c.deliveries, delivery{due: due, seq: c.seq, body: body})
		}
	}
	return popDue(&c.deliveries, now), c.gen
}

// deliver POSTs one callback, retrying a failed attempt with backoff, and
// counts the outcome (unless a Reset came in between).
func (s *Server) deliver(ctx context.Context, client *http.Client, d delivery, gen uint64) {
	b, _ := json.Marshal(d.body)
	log := s.log.With().Str("external_id", card.Scrub(d.body.ExternalID)).Str("psp_order_id", d.body.OrderID).
		Str("status", d.body.Status).Logger()
	wait := s.cfg.CallbackBackoff
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, client, b)
		if err == nil {
			s.countCallback(gen, true)
			log.Debug().Int("attempt", attempt).Msg("callback delivered")
			return
		}
		if ctx.Err() != nil {
			log.Info().Int("attempt", attempt).Msg("callback abandoned: shutting down")
			return
		}
		if attempt > s.cfg.CallbackRetries {
			s.countCallback(gen, false)
			log.Warn().Int("attempts", attempt).Str("error", err.Error()).Msg("callback dropped after its retries")
			return
		}
		log.Debug().Int("attempt", attempt).Str("error", err.Error()).Dur("retry_in", wait).Msg("callback failed")
		if !s.sleep(ctx, wait) {
			return
		}
		wait *= 2
	}
}

// post sends one attempt; an error names no header and no URL userinfo or
// query.
func (s *Server) post(ctx context.Context, client *http.Client, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("callback request: %s", redactURL(s.cfg.CallbackURL))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(CallbackSecretHeader, s.cfg.CallbackSecret)
	resp, err := client.Do(req)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", redactURL(s.cfg.CallbackURL), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: answered %d", redactURL(s.cfg.CallbackURL), resp.StatusCode)
	}
	return nil
}

func (s *Server) countCallback(gen uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.cb.gen {
		return
	}
	if ok {
		s.stats.CallbacksSent++
	} else {
		s.stats.CallbacksFailed++
	}
}
