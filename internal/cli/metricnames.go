package cli

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// WorkerMetricNames lists every series name a worker's /metrics may
// export, from the registry runWorker builds on rdb (described, so vectors
// without a sample yet count; histograms and summaries with their _bucket,
// _sum and _count series): tests check the alert rules and the dashboard
// against it. Asynq's queue collector describes what it collects: rdb must
// answer and hold a queue for its names to be listed.
func WorkerMetricNames(rdb redis.UniversalClient) ([]string, error) {
	reg := prometheus.NewRegistry()
	worker.NewMetrics(reg)
	notify.NewDeliveryCounter(reg)
	reg.MustRegister(newCallbackResults())
	registerScrapeCollectors(reg, rdb)
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	for d := range ch {
		if sm := fqName.FindStringSubmatch(d.String()); sm != nil {
			names[sm[1]] = true
		}
	}
	// Which names are histograms or summaries: gathered with a sample each.
	typed := prometheus.NewRegistry()
	m := worker.NewMetrics(typed)
	m.ObservePSP(psp.Result{Op: psp.OpWithdrawalCreate})
	m.ObserveLoadToFinal(lifecycle.Paid, 0)
	typed.MustRegister(collectors.NewGoCollector())
	fams, err := typed.Gather()
	if err != nil {
		return nil, fmt.Errorf("cli: gather: %w", err)
	}
	for _, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[f.GetName()+"_bucket"] = true
			fallthrough
		case dto.MetricType_SUMMARY:
			names[f.GetName()+"_sum"] = true
			names[f.GetName()+"_count"] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
