package worker

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/sandbox"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// finalCounts returns payout_load_to_final_seconds's sample count and sum
// by state.
func finalCounts(t *testing.T, reg *prometheus.Registry) (map[string]uint64, map[string]float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n, sum := map[string]uint64{}, map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "payout_load_to_final_seconds" || f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					n[l.GetValue()] += m.GetHistogram().GetSampleCount()
					sum[l.GetValue()] += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return n, sum
}

// TestLoadToFinalIsObservedOncePerFinalPayout: the histogram counts each
// payout once, when it is done with: created when outcomes are not
// followed, paid when they are (created is then not final).
func TestLoadToFinalIsObservedOncePerFinalPayout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"outcomes not followed", fastConfig(), "created"},
		{"outcomes followed", trackingConfig(50*time.Millisecond, time.Minute), "paid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			tt.cfg.Metrics = NewMetrics(reg)
			h := newHarness(t, tt.cfg, sandbox.Config{SettleAfter: 50 * time.Millisecond})
			// The batch's load time is kept in whole milliseconds: an
			// observation counts from up to 1 ms before time.Now().
			start := time.Now().Truncate(time.Millisecond)
			h.add(visa, visa, visa)
			h.start()
			h.waitFinal(10 * time.Second)
			// The ledger moves first, the metric follows in the handler.
			h.waitFor("3 observations", 5*time.Second, func() bool {
				n, _ := finalCounts(t, reg)
				var all uint64
				for _, v := range n {
					all += v
				}
				return all >= 3
			})
			n, sum := finalCounts(t, reg)
			if len(n) != 1 || n[tt.want] != 3 {
				t.Fatalf("observations by state %v, want 3 %s", n, tt.want)
			}
			if s := sum[tt.want]; s <= 0 || s > 3*time.Since(start).Seconds() {
				t.Errorf("sum %vs for 3 payouts done within %s", s, time.Since(start))
			}
		})
	}
}
