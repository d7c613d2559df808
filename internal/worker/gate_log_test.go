package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/psp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestBreakerLogsEachTransition: the breaker opened, half-open and closed
// again logs three lines, each saying what its state means; none but the
// opening says "holding requests back" (issue 43: "(open: ...)" was
// printed on every transition, the closing included).
func TestBreakerLogsEachTransition(t *testing.T) {
	var out syncBuffer
	g := newGate(nil, Config{BreakerCooldown: 20 * time.Millisecond}, NewMetrics(prometheus.NewRegistry()), zerolog.New(&out))
	for range 10 {
		tk, err := g.allow()
		if err != nil {
			t.Fatal(err)
		}
		tk(psp.Result{Outcome: psp.Ambiguous})
	}
	var tk ticket
	testenv.Eventually(t, "the breaker half-open", func() bool {
		var err error
		tk, err = g.allow()
		return err == nil
	})
	tk(psp.Result{Outcome: psp.Created, HTTPStatus: 200})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []struct{ to, says string }{
		{"open", "holding requests back"}, {"half-open", "one trial request"}, {"closed", "the PSP answers again"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], `"to":"`+w.to+`"`) || !strings.Contains(lines[i], w.says) {
			t.Errorf("line %d: %s; want to %s saying %q", i+1, lines[i], w.to, w.says)
		}
		if w.to != "open" && strings.Contains(lines[i], "holding requests back") {
			t.Errorf("line %d, to %s, says the breaker holds requests back: %s", i+1, w.to, lines[i])
		}
	}
}
