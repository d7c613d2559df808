package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// LogSize bounds each endpoint's delivery log: the most recent LogSize
// events delivered (or tried) to it, with their bodies, for the console
// and for redelivery. About 1 KB an event: 500 KB an endpoint at most.
const LogSize = 500

// Delivery is the delivery log's record of one event to one endpoint:
// what the console shows and what a redelivery sends again.
type Delivery struct {
	Event    string `json:"event"`
	Type     Type   `json:"type"`
	Endpoint string `json:"endpoint"` // EndpointID
	// Attempts counts every POST of the event to the endpoint, the
	// redeliveries' included.
	Attempts int    `json:"attempts"`
	Status   string `json:"status"` // of the last attempt: HTTP 204, no answer: ...
	OK       bool   `json:"ok"`     // the last attempt was answered 2xx
	// At is the last attempt; Next the retry Asynq will make (zero: none,
	// delivered or out of retries).
	At   time.Time       `json:"at"`
	Next time.Time       `json:"next,omitzero"`
	Body json.RawMessage `json:"body"`
}

// Failed tells whether the event's last attempt failed.
func (d Delivery) Failed() bool { return !d.OK }

// deliveriesHelp is the help of the delivery counter.
const deliveriesHelp = "Webhook delivery attempts, by endpoint (notify.EndpointID) and result (delivered, failed)."

// NewDeliveryCounter creates payout_webhook_deliveries_total and
// registers it on reg (nil: not registered).
func NewDeliveryCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payout_webhook_deliveries_total", Help: deliveriesHelp},
		[]string{"endpoint", "result"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// Counting returns a copy of d that counts its attempts on c
// (NewDeliveryCounter).
func (d *Deliverer) Counting(c *prometheus.CounterVec) *Deliverer {
	cp := *d
	cp.counter = c
	return &cp
}

// count adds one attempt to the counter, when there is one.
func (d *Deliverer) count(p payload, ok bool) {
	if d.counter == nil {
		return
	}
	result := "failed"
	if ok {
		result = "delivered"
	}
	d.counter.WithLabelValues(EndpointID(p.URL), result).Inc()
}

// recordScript stores one record in an endpoint's log and drops the
// oldest beyond the bound. KEYS: log, recent; ARGV: event, record, score
// (ms), bound.
var recordScript = redis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #old, 2 do redis.call('HDEL', KEYS[1], old[i]) end
end
return 0
`)

// record writes an attempt into the delivery log. A log that cannot be
// written is logged: it never fails the delivery.
func (d *Deliverer) record(ctx context.Context, p payload, status string, ok bool, next time.Time, log zerolog.Logger) {
	d.count(p, ok)
	if d.rdb == nil {
		return
	}
	ep := EndpointID(p.URL)
	rec := Delivery{Event: p.ID, Type: p.Type, Endpoint: ep, Attempts: 1, Status: status, OK: ok, At: d.now().UTC(), Next: next, Body: p.Body}
	if prev, err := d.rdb.HGet(ctx, keys.WebhookLog(ep), p.ID).Bytes(); err == nil {
		var old Delivery
		if json.Unmarshal(prev, &old) == nil {
			rec.Attempts = old.Attempts + 1
		}
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = d.rdb.HSet(ctx, keys.WebhookEndpoints(), ep, p.URL).Err()
	}
	if err == nil {
		err = recordScript.Run(ctx, d.rdb, []string{keys.WebhookLog(ep), keys.WebhookRecent(ep)},
			p.ID, b, rec.At.UnixMilli(), LogSize).Err()
	}
	if err != nil {
		log.Warn().Err(err).Msg("delivery log not written")
	}
}

// EndpointInfo is one endpoint of the delivery log.
type EndpointInfo struct {
	ID  string // EndpointID
	URL string // redacted (Redact): its path may hold a token
}

// Endpoints lists the endpoints deliveries were made to, by id.
func Endpoints(ctx context.Context, rdb redis.UniversalClient) ([]EndpointInfo, error) {
	m, err := rdb.HGetAll(ctx, keys.WebhookEndpoints()).Result()
	if err != nil {
		return nil, fmt.Errorf("notify: endpoints: %w", err)
	}
	out := make([]EndpointInfo, 0, len(m))
	for id, u := range m {
		out = append(out, EndpointInfo{ID: id, URL: Redact(u)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL+out[i].ID < out[j].URL+out[j].ID })
	return out, nil
}

// Deliveries returns up to n of an endpoint's most recent deliveries,
// newest first.
func Deliveries(ctx context.Context, rdb redis.UniversalClient, endpoint string, n int64) ([]Delivery, error) {
	ids, err := rdb.ZRevRange(ctx, keys.WebhookRecent(endpoint), 0, n-1).Result()
	if err != nil || len(ids) == 0 {
		return nil, wrapLog(err)
	}
	vals, err := rdb.HMGet(ctx, keys.WebhookLog(endpoint), ids...).Result()
	if err != nil {
		return nil, wrapLog(err)
	}
	out := make([]Delivery, 0, len(vals))
	for _, v := range vals {
		s, _ := v.(string)
		var d Delivery
		if s != "" && json.Unmarshal([]byte(s), &d) == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

func wrapLog(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("notify: delivery log: %w", err)
}

// ErrUnknown is the error of a redelivery of an endpoint or event the
// delivery log does not hold.
var ErrUnknown = errors.New("notify: not in the delivery log")

// Redeliver queues the events of an endpoint's log again: the event id
// when given, else every event whose last attempt failed at or after
// since. It returns the ids queued. A redelivery is a new task (its own
// retries), sending the same body under the same webhook-id: receivers
// that saw it drop it.
func Redeliver(ctx context.Context, rdb redis.UniversalClient, endpoint, event string, since time.Time) ([]string, error) {
	u, err := rdb.HGet(ctx, keys.WebhookEndpoints(), endpoint).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("endpoint %s: %w", endpoint, ErrUnknown)
	}
	if err != nil {
		return nil, wrapLog(err)
	}
	all, err := Deliveries(ctx, rdb, endpoint, LogSize)
	if err != nil {
		return nil, err
	}
	client := asynq.NewClientFromRedisClient(rdb)
	suffix := ":re:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var done []string
	for _, d := range all {
		if event != "" && d.Event != event || event == "" && (d.OK || d.At.Before(since)) {
			continue
		}
		p := payload{URL: u, ID: d.Event, Type: d.Type, Body: d.Body}
		if err := enqueue(ctx, client, p, TaskID(d.Event, u)+suffix); err != nil {
			return done, fmt.Errorf("notify: redeliver %s: %w", d.Event, err)
		}
		done = append(done, d.Event)
	}
	if event != "" && len(done) == 0 {
		return nil, fmt.Errorf("event %s of endpoint %s: %w", event, endpoint, ErrUnknown)
	}
	return done, nil
}
