package worker

import (
	"strconv"

	"github.com/acme/payout/internal/psp"
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
	breaker   prometheus.Gauge
	latency   *prometheus.HistogramVec
}

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
		breaker: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payout_psp_breaker_state", Help: "PSP circuit breaker: 0 closed, 1 half-open, 2 open.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payout_psp_request_duration_seconds",
			Help:    "PSP request latency by operation and HTTP status code (0: no answer).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"op", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.outcomes, m.ambiguous, m.checks, m.deferred, m.repairs, m.mismatch, m.pauses, m.breaker, m.latency)
	}
	return m
}

// ObservePSP records one PSP request; pass it as psp.Config.Observe.
func (m *Metrics) ObservePSP(r psp.Result) {
	m.latency.WithLabelValues(string(r.Op), strconv.Itoa(r.HTTPStatus)).Observe(r.Duration.Seconds())
}
