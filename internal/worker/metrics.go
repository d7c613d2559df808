package worker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the worker's Prometheus series.
type Metrics struct {
	outcomes  *prometheus.CounterVec
	ambiguous *prometheus.CounterVec
	checks    *prometheus.CounterVec
	deferred  *prometheus.CounterVec
	repairs   *prometheus.CounterVec
	mismatch  *prometheus.CounterVec
	pauses    prometheus.Counter
	// contradictions: PSP answers that contradicted a manual resolution
	contradictions prometheus.Counter
	breaker        prometheus.Gauge
	// rolledBack is 1 while this worker sends no create because the
	// ledger went back in time (epoch.go).
	rolledBack prometheus.Gauge
	latency    *prometheus.HistogramVec
	final      *prometheus.HistogramVec
	// The reconciler's last sweep in this process (the lease moves the
	// sweep between workers: rules take max() over them).
	sweepAt      prometheus.Gauge
	sweepOpen    prometheus.Gauge
	sweepRepairs prometheus.Gauge
	// released counts the scheduled payouts this worker's releaser moved
	// to queued (their creates enqueued).
	released prometheus.Counter

	mu     sync.Mutex
	loaded map[string]time.Time // batch -> load time, for final
}

// loadedCacheSize bounds Metrics.loaded: more batches in flight at once
// than this only cost a re-read of a batch's metadata.
const loadedCacheSize = 1024

// NewMetrics creates the series and registers them on reg (nil: not
// registered, for tests and embedded runs).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_outcomes_total", Help: "Payout state changes recorded by workers, by new state.",
		}, []string{"state"}),
		ambiguous: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_ambiguous_total", Help: "Creates whose outcome was unknown and became status checks, by cause.",
		}, []string{"cause"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_status_checks_total", Help: "Status checks sent to the PSP, by answer (found, missing, noanswer).",
		}, []string{"answer"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_deferred_total", Help: "Tasks held back without using their retry budget, by reason.",
		}, []string{"reason"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_repairs_total", Help: "Payout reminders (tasks) restored because a due step had no live task, by who found it (handler, reconciler).",
		}, []string{"by"}),
		mismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_psp_mismatches_total", Help: "PSP 200 answers not taken as proof because they did not match our payout, by first reason.",
		}, []string{"reason"}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payout_queue_pauses_total", Help: "Times a worker paused the payout queue after a configuration fault.",
		}),
		contradictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payout_manual_contradictions_total", Help: "PSP answers that contradicted a person's resolution (an order found for a payout marked rejected): each moved the payout to needs_review.",
		}),
		breaker: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_psp_breaker_state", Help: "PSP circuit breaker: 0 closed, 1 half-open, 2 open.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payout_psp_request_duration_seconds",
			Help:    "PSP request latency by operation and HTTP status code (0: no answer).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"op", "code"}),
		final: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payout_load_to_final_seconds",
			Help:    "Time from a payout's batch being loaded to the payout's final state (paid, failed, rejected, needs_review; created when outcomes are not followed), by that state.",
			Buckets: []float64{10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800},
		}, []string{"state"}),
		sweepAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_reconcile_last_sweep_timestamp_seconds", Help: "When this worker's reconciler last finished a sweep (Unix seconds; 0: never). One worker sweeps per interval: take max() over workers.",
		}),
		sweepOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_reconcile_last_sweep_open_payouts", Help: "Open payouts this worker's last reconciler sweep looked at.",
		}),
		sweepRepairs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_reconcile_last_sweep_repairs", Help: "Lost tasks this worker's last reconciler sweep restored (all repairs: payout_repairs_total).",
		}),
		rolledBack: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_ledger_rolled_back", Help: "1 while this worker sends no create because the ledger went back in time (Redis lost acknowledged writes); 0 otherwise.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payout_released_total", Help: "Scheduled payouts this worker's releaser moved to queued at their release time (their creates enqueued).",
		}),
		loaded: map[string]time.Time{},
	}
	if reg != nil {
		reg.MustRegister(m.outcomes, m.ambiguous, m.checks, m.deferred, m.repairs, m.mismatch, m.pauses, m.contradictions, m.breaker, m.latency,
			m.final, m.sweepAt, m.sweepOpen, m.sweepRepairs, m.rolledBack, m.released)
	}
	return m
}

// swept records a reconciler sweep.
func (m *Metrics) swept(rep reconcile.Report, at time.Time) {
	m.sweepAt.Set(float64(at.UnixMilli()) / 1000)
	m.sweepOpen.Set(float64(rep.Open))
	m.sweepRepairs.Set(float64(len(rep.Repairs)))
}

// loadedAt returns when batch was loaded, from the cache or the ledger.
func (m *Metrics) loadedAt(ctx context.Context, l *ledger.Ledger, batch string) (time.Time, bool) {
	m.mu.Lock()
	t, ok := m.loaded[batch]
	m.mu.Unlock()
	if ok {
		return t, true
	}
	b, err := l.Batch(ctx, batch)
	if err != nil || b.LoadedAt.IsZero() {
		return time.Time{}, false
	}
	m.mu.Lock()
	if len(m.loaded) >= loadedCacheSize {
		clear(m.loaded)
	}
	m.loaded[batch] = b.LoadedAt
	m.mu.Unlock()
	return b.LoadedAt, true
}

// outcome counts a state change recorded by this worker and, when the
// payout is done with (a final state; created only when outcomes are not
// followed), observes the time since its batch was loaded.
func (w *Worker) outcome(ctx context.Context, batch string, st lifecycle.State) {
	w.metrics.outcomes.WithLabelValues(string(st)).Inc()
	if !st.Final() || st == lifecycle.Created && w.cfg.Outcome.window() > 0 {
		return
	}
	if t, ok := w.metrics.loadedAt(ctx, w.ledger, batch); ok {
		w.metrics.ObserveLoadToFinal(st, time.Since(t))
	}
}

// ObservePSP records one PSP request; pass it as psp.Config.Observe.
func (m *Metrics) ObservePSP(r psp.Result) {
	m.latency.WithLabelValues(string(r.Op), strconv.Itoa(r.HTTPStatus)).Observe(r.Duration.Seconds())
}

// ObserveLoadToFinal records that a payout reached final state st d after
// its batch was loaded.
func (m *Metrics) ObserveLoadToFinal(st lifecycle.State, d time.Duration) {
	m.final.WithLabelValues(string(st)).Observe(max(d.Seconds(), 0))
}
