package cli

import (
	"github.com/acme/payout/internal/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
)

// uiConfig reads the UI credentials from the environment only: they never
// appear on a command line (and so never in ps output).
func uiConfig(e *env, addr string, readOnly, insecure bool, prom string, log zerolog.Logger) ui.Config {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	return ui.Config{
		User: e.getenv("PAYOUT_UI_USER"), Password: e.getenv("PAYOUT_UI_PASSWORD"), Token: e.getenv("PAYOUT_UI_TOKEN"),
		ReadOnly: readOnly, InsecureLocal: insecure, Addr: addr, PrometheusAddr: prom, Logger: log, Registry: reg,
	}
}
