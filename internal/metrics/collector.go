package metrics

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// DefaultInterval is how often one worker recomputes the snapshot.
const DefaultInterval = 30 * time.Second

// Publisher recomputes the snapshot every Interval in whichever process
// holds the lease "metrics" for that interval, and stores it for 3
// intervals: a snapshot older than that (its publisher died and no other
// took over) is not exported.
type Publisher struct {
	Redis    redis.UniversalClient
	Ledger   *ledger.Ledger
	Interval time.Duration
	Logger   zerolog.Logger
}

// Run publishes until ctx is done; a failed interval is logged and retried
// at the next.
func (p Publisher) Run(ctx context.Context) {
	if p.Interval <= 0 {
		return
	}
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		if err := p.Once(ctx, owner); err != nil && ctx.Err() == nil {
			p.Logger.Warn().Err(err).Msg("on-call gauges not computed; next interval")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once computes and stores the snapshot if owner gets the lease.
func (p Publisher) Once(ctx context.Context, owner string) error {
	ok, err := p.Ledger.Locks().TryLease(ctx, "metrics", owner, p.Interval)
	if err != nil || !ok {
		return err
	}
	start := time.Now()
	s, err := Compute(ctx, p.Ledger)
	if err != nil {
		return err
	}
	if err := Store(ctx, p.Redis, s, 3*p.Interval); err != nil {
		return err
	}
	p.Logger.Debug().Dur("took", time.Since(start)).Msg("on-call gauges computed")
	return nil
}

// Collector exports, at each scrape, the stored snapshot and Redis's memory
// as this process sees it. It reads Redis once per scrape (GET, TIME and
// INFO memory in one pipeline); when Redis does not answer it exports
// payout_redis_up 0 and nothing else.
type Collector struct {
	rdb     redis.UniversalClient
	timeout time.Duration

	up, used, max, snapAge                 *prometheus.Desc
	open, openAmount, openAge              *prometheus.Desc
	review, reviewAmount, reviewAge        *prometheus.Desc
	appBatches, appN, appAmount, appOldest *prometheus.Desc
	scheduled                              *prometheus.Desc
}

// NewCollector returns the collector on rdb.
func NewCollector(rdb redis.UniversalClient) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{
		rdb: rdb, timeout: 5 * time.Second,
		up:           d("payout_redis_up", "1 when this worker read Redis for this scrape, else 0."),
		used:         d("payout_redis_used_memory_bytes", "Redis used_memory (INFO memory) as this worker sees it."),
		max:          d("payout_redis_maxmemory_bytes", "Redis maxmemory (0: no limit) as this worker sees it."),
		snapAge:      d("payout_ledger_snapshot_age_seconds", "Age of the ledger gauges below: when one worker last computed them (Redis time)."),
		open:         d("payout_open_payouts", "Open payouts by state (queued, submitting, checking, awaiting_outcome), batches awaiting approval excluded.", "state"),
		openAmount:   d("payout_open_amount", "Sum of the amounts of the open payouts by state.", "state"),
		openAge:      d("payout_open_oldest_age_seconds", "Seconds since the oldest open payout in the state entered it (absent: none).", "state"),
		review:       d("payout_needs_review_payouts", "Payouts that need a person's review (payout resolve)."),
		reviewAmount: d("payout_needs_review_amount", "Sum of the amounts of the payouts that need review."),
		reviewAge:    d("payout_needs_review_oldest_age_seconds", "Seconds since the oldest payout needing review entered that state (absent: none)."),
		appBatches:   d("payout_awaiting_approval_batches", "Batches loaded with --approval required that wait for payout approve."),
		appN:         d("payout_awaiting_approval_payouts", "Payouts of the batches awaiting approval."),
		appAmount:    d("payout_awaiting_approval_amount", "Sum of the amounts of the batches awaiting approval."),
		appOldest:    d("payout_awaiting_approval_oldest_age_seconds", "Seconds since the oldest batch awaiting approval was loaded (absent: none)."),
		scheduled:    d("payout_scheduled_payouts", "Payouts waiting for their release time (state scheduled), those of batches awaiting approval included."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.used, c.max, c.snapAge, c.open, c.openAmount, c.openAge,
		c.review, c.reviewAmount, c.reviewAge, c.appBatches, c.appN, c.appAmount, c.appOldest, c.scheduled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	pipe := c.rdb.Pipeline()
	get := pipe.Get(ctx, keys.MetricsSnapshot()) // the snapshot in the same round trip as Redis's time and memory
	now := pipe.Time(ctx)
	info := pipe.Info(ctx, "memory")
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	if now.Err() != nil {
		gauge(c.up, 0)
		return
	}
	gauge(c.up, 1)
	if info.Err() == nil {
		used, max := memory(info.Val())
		gauge(c.used, used)
		gauge(c.max, max)
	}
	b, err := get.Bytes()
	if err != nil {
		return // no snapshot: no worker computed one lately
	}
	s, err := decodeSnapshot(b)
	if err != nil {
		return
	}
	t := now.Val()
	age := func(d *prometheus.Desc, since time.Time, labels ...string) {
		if !since.IsZero() {
			gauge(d, max0(t.Sub(since).Seconds()), labels...)
		}
	}
	gauge(c.snapAge, max0(t.Sub(s.At).Seconds()))
	for _, st := range States {
		f := s.States[st]
		if st == lifecycle.NeedsReview {
			gauge(c.review, float64(f.Payouts))
			gauge(c.reviewAmount, f.Amount.Decimal().InexactFloat64())
			age(c.reviewAge, f.Oldest)
			continue
		}
		gauge(c.open, float64(f.Payouts), string(st))
		gauge(c.openAmount, f.Amount.Decimal().InexactFloat64(), string(st))
		age(c.openAge, f.Oldest, string(st))
	}
	gauge(c.appBatches, float64(s.ApprovalBatches))
	gauge(c.appN, float64(s.Approval.Payouts))
	gauge(c.appAmount, s.Approval.Amount.Decimal().InexactFloat64())
	age(c.appOldest, s.Approval.Oldest)
	gauge(c.scheduled, float64(s.Scheduled))
}

func max0(v float64) float64 {
	if v < 0 {
		return 0
	}
	return v
}

// memory reads used_memory and maxmemory from INFO memory's text.
func memory(info string) (used, max float64) {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch k {
		case "used_memory":
			used = n
		case "maxmemory":
			max = n
		}
	}
	return used, max
}
