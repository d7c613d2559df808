package cli

import (
	"context"
	"flag"
	"net"
	"net/netip"

	"github.com/acme/payout/internal/callback"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// callbackFlags configure the listener for the PSP's callbacks.
type callbackFlags struct {
	addr   string
	header string
	allow  string
	rate   float64
}

func (c *callbackFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "callback-addr", "", "address to receive the PSP's callbacks on (empty: off); needs PAYOUT_CALLBACK_SECRET. A callback only moves that payout's next status query to now")
	fs.StringVar(&c.header, "callback-header", callback.DefaultHeader, "header that carries the callback secret (only a header: a secret in the URL is refused)")
	fs.StringVar(&c.allow, "callback-allow", "", "comma-separated networks (CIDR) callbacks may come from (empty: any)")
	fs.Float64Var(&c.rate, "callback-rate", callback.DefaultRate, "authentic callbacks per second accepted from one source address (forged ones are refused before the limit and never spend it)")
}

// start serves callbacks with h until ctx is done; without --callback-addr
// it does nothing.
func (c *callbackFlags) start(ctx context.Context, e *env, h callback.Hinter, reg prometheus.Registerer, log zerolog.Logger) error {
	if c.addr == "" {
		return nil
	}
	cfg := callback.Config{Secret: e.getenv("PAYOUT_CALLBACK_SECRET"), Header: c.header, Rate: c.rate}
	for _, f := range splitList(c.allow) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return usageErr("--callback-allow %q: %v", f, err)
		}
		cfg.Allow = append(cfg.Allow, p)
	}
	results := newCallbackResults()
	if reg != nil {
		reg.MustRegister(results)
	}
	srv, err := callback.New(cfg, h, log.With().Str("component", "callbacks").Logger(),
		func(r callback.Result) { results.WithLabelValues(string(r)).Inc() })
	if err != nil {
		return usageErr("--callback-addr: %v", err)
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return usageErr("--callback-addr %s: %v", c.addr, err)
	}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error().Err(err).Msg("callback listener stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("receiving PSP callbacks")
	return nil
}

// newCallbackResults is the counter of callbacks by result.
func newCallbackResults() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payout_callbacks_total", Help: "PSP callbacks received, by result (hinted, nothing, malformed, unauthorized, forbidden, limited, too_large, failed).",
	}, []string{"result"})
}
