package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/metrics"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/worker"
	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

func runWorker(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "worker", "[flags]")
	var (
		lf          logFlags
		rf          redisFlags
		kf          keyFlags
		pf          pspFlags
		pspCA       string
		pspCert     string
		pspKey      string
		wf          workerFlags
		pl          pipelineFlag
		df          durabilityFlags
		cf          callbackFlags
		nf          notifyFlags
		metricsAddr string
		gaugesEvery time.Duration
		check       bool
	)
	lf.register(fs)
	rf.register(fs)
	kf.register(fs)
	pf.register(fs)
	fs.StringVar(&pspCA, "psp-ca-file", "", "PEM CA certificates that sign the PSP's certificate, trusted instead of the system roots; re-read when it changes")
	fs.StringVar(&pspCert, "psp-client-cert", "", "PEM client certificate for mutual TLS with the PSP (with --psp-client-key); re-read when it changes")
	fs.StringVar(&pspKey, "psp-client-key", "", "PEM private key of --psp-client-cert; re-read when it changes")
	wf.register(fs)
	pl.register(fs)
	df.register(fs)
	cf.register(fs)
	nf.register(fs)
	fs.StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9102", "address of the Prometheus /metrics endpoint (empty: off)")
	fs.DurationVar(&gaugesEvery, "ledger-metrics-interval", metrics.DefaultInterval, "how often one worker (under a lease) recomputes the on-call gauges read from the ledger (open payouts by state and the oldest one's age, needs review, awaiting approval) that every worker exports; 0: this process never computes them")
	fs.BoolVar(&check, "check", false, "prove that --psp-url is the PSP's API and that it accepts the token (status of a random id, with and without the token; see docs/psp-api.md), then exit; touch no payout")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	log, err := lf.logger(e)
	if err != nil {
		return err
	}
	var probs problems
	if pf.url == "" {
		probs.flag("psp-url", "--psp-url (PAYOUT_PSP_URL) is required")
	}
	cfg := wf.config(&pf, &probs)
	if err := probs.err(); err != nil {
		return err
	}
	tokens, err := pf.tokenSource(e)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	client, err := psp.New(psp.Config{
		BaseURL: pf.url, Token: tokens, Timeout: pf.timeout, AmountAsNumber: pf.amountAsNumber,
		StatusIDByExternalID: pf.statusByExtID, MaxConnsPerHost: cfg.Concurrency,
		CAFile: pspCA, ClientCertFile: pspCert, ClientKeyFile: pspKey,
		Logger: log.With().Str("component", "psp").Logger(), Observe: m.ObservePSP,
	})
	if err != nil {
		return configErr(err)
	}
	defer client.Close()
	if check {
		return checkToken(ctx, e, client)
	}
	ring, err := kf.keyring(e)
	if err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := df.apply(ctx, rdb, &cfg, log); err != nil {
		return err
	}
	checkHashLimits(ctx, rdb, log)
	if err := nf.configure(e, rdb, &cfg, log); err != nil {
		return err
	}

	ledgerConn, err := pl.conn(rdb)
	if err != nil {
		return err
	}
	cfg.Redis, cfg.Ledger, cfg.PSP, cfg.Opener, cfg.Metrics, cfg.Logger = rdb, ledger.New(ledgerConn), client, ring, m, log
	w, err := worker.New(cfg)
	if err != nil {
		return workerProblems(err)
	}
	if err := cf.start(ctx, e, w, reg, log); err != nil {
		return err
	}
	go metrics.Publisher{Redis: rdb, Ledger: cfg.Ledger, Interval: gaugesEvery, Logger: log.With().Str("component", "metrics").Logger()}.Run(ctx)
	if metricsAddr != "" {
		stop, err := serveMetrics(ctx, metricsAddr, rdb, reg, log)
		if err != nil {
			return configErr(err)
		}
		defer stop()
	}
	return w.Run(ctx)
}

// checkToken proves that --psp-url is the PSP's API and that it takes the
// token (psp.Client.CheckAPI: a status query of an id that cannot exist,
// and the same query without a token), touching no payout.
func checkToken(ctx context.Context, e *env, c *psp.Client) error {
	res := c.CheckAPI(ctx)
	switch res.Verdict {
	case psp.APIAccepted:
		fmt.Fprintf(e.stdout, "PSP API answered and the token was accepted (%s, in %s)\n", res.Message, res.Duration.Round(time.Millisecond))
		return nil
	case psp.APITokenRefused:
		return configErr(fmt.Errorf("PSP check: %s", res.Message))
	case psp.APINotPSP:
		return configErr(fmt.Errorf("PSP check failed: %s", res.Message))
	}
	return infraErr(fmt.Errorf("PSP check inconclusive: %s", res.Message))
}

// serveMetrics serves /metrics with the worker's series, Go runtime series,
// the Asynq queue sizes and the on-call gauges (internal/metrics).
func serveMetrics(ctx context.Context, addr string, rdb redis.UniversalClient, reg *prometheus.Registry, log zerolog.Logger) (func(), error) {
	registerScrapeCollectors(reg, rdb)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("metrics on /metrics")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// registerScrapeCollectors adds what a worker's /metrics reads at scrape
// time: Go runtime and process series, Asynq's queue metrics and the
// on-call gauges.
func registerScrapeCollectors(reg prometheus.Registerer, rdb redis.UniversalClient) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		asynqmetrics.NewQueueMetricsCollector(asynq.NewInspectorFromRedisClient(rdb)), metrics.NewCollector(rdb))
}
