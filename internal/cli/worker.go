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
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// workerCmd is one `payout worker`: its flags, then what each step sets up
// for the next one.
type workerCmd struct {
	e *env
	// flags
	lf                     logFlags
	rf                     redisFlags
	kf                     keyFlags
	pf                     pspFlags
	pspCA, pspCert, pspKey string
	wf                     workerFlags
	pl                     pipelineFlag
	df                     durabilityFlags
	cb                     callbackFlags
	nf                     notifyFlags
	mf                     mailFlags
	metricsAddr            string
	gaugesEvery            time.Duration
	check                  bool
	sf                     startCheckFlags

	// set up by the steps
	log zerolog.Logger
	cfg worker.Config
	reg *prometheus.Registry
}

// runWorker runs a worker until ctx ends (or, with --check, checks the
// PSP's token and exits).
func runWorker(ctx context.Context, e *env, args []string) error {
	c := &workerCmd{e: e}
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.configure(); err != nil {
		return err
	}
	client, err := c.openPSP()
	if err != nil {
		return err
	}
	defer client.Close()
	if c.check {
		return checkToken(ctx, e, client)
	}
	c.cfg.PSP = client
	ring, err := c.kf.keyring(e)
	if err != nil {
		return err
	}
	c.cfg.Opener = ring
	rdb, err := c.rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := c.setUpRedis(ctx, rdb); err != nil {
		return err
	}
	if err := c.sf.startChecks(ctx, c.cfg.Ledger, ring, client, c.log); err != nil {
		return err
	}
	return c.run(ctx, rdb)
}

// parse registers and parses the flags of payout worker.
func (c *workerCmd) parse(args []string) error {
	fs := newFlags(c.e, "worker", "[flags]")
	c.lf.register(fs)
	c.rf.register(fs)
	c.kf.register(fs)
	c.pf.register(fs)
	fs.StringVar(&c.pspCA, "psp-ca-file", "", "PEM CA certificates that sign the PSP's certificate, trusted instead of the system roots; re-read when it changes")
	fs.StringVar(&c.pspCert, "psp-client-cert", "", "PEM client certificate for mutual TLS with the PSP (with --psp-client-key); re-read when it changes")
	fs.StringVar(&c.pspKey, "psp-client-key", "", "PEM private key of --psp-client-cert; re-read when it changes")
	c.wf.register(fs)
	c.pl.register(fs)
	c.df.register(fs)
	c.cb.register(fs)
	c.nf.register(fs)
	c.mf.register(fs)
	fs.StringVar(&c.metricsAddr, "metrics-addr", "127.0.0.1:9102", "address of the Prometheus /metrics endpoint (empty: off)")
	fs.DurationVar(&c.gaugesEvery, "ledger-metrics-interval", metrics.DefaultInterval, "how often one worker (under a lease) recomputes the on-call gauges read from the ledger (open payouts by state and the oldest one's age, needs review, awaiting approval) that every worker exports; 0: this process never computes them")
	c.sf.register(fs)
	fs.BoolVar(&c.check, "check", false, "prove that --psp-url is the PSP's API and that it accepts the token (status of a random id, with and without the token; see docs/psp-api.md), then exit; touch no payout")
	return parse(c.e, fs, args)
}

// configure checks the flags and builds the worker's configuration; every
// problem of the worker flags is reported at once.
func (c *workerCmd) configure() error {
	var err error
	if c.log, err = c.lf.logger(c.e); err != nil {
		return err
	}
	c.log = c.df.logger(c.log)
	var probs problems
	if c.pf.url == "" {
		probs.flag("psp-url", "--psp-url (PAYOUT_PSP_URL) is required")
	} else {
		c.pf.checkURL(&probs)
	}
	c.cfg = c.wf.config(&c.pf, &probs)
	c.cfg.Queue = c.e.hooks.Queue
	if err := probs.err(); err != nil {
		return err
	}
	return c.mf.check()
}

// openPSP makes the PSP client and the worker's metrics, which observe it.
func (c *workerCmd) openPSP() (*psp.Client, error) {
	tokens, err := c.pf.tokenSource(c.e)
	if err != nil {
		return nil, err
	}
	c.reg = prometheus.NewRegistry()
	m := worker.NewMetrics(c.reg)
	c.cfg.Metrics = m
	client, err := psp.New(psp.Config{
		BaseURL: c.pf.url, Token: tokens, Timeout: c.pf.timeout, AmountAsNumber: c.pf.amountAsNumber,
		StatusIDByExternalID: c.pf.statusByExtID, MaxConnsPerHost: c.cfg.Concurrency,
		CAFile: c.pspCA, ClientCertFile: c.pspCert, ClientKeyFile: c.pspKey,
		Logger: c.log.With().Str("component", "psp").Logger(), Observe: m.ObservePSP,
		Unsafe: c.e.unsafe.PSP,
	})
	if err != nil {
		return nil, configErr(err)
	}
	return client, nil
}

// setUpRedis applies the durability rules to rdb, checks its hash limits,
// configures the notifications and makes the ledger.
func (c *workerCmd) setUpRedis(ctx context.Context, rdb redis.UniversalClient) error {
	if err := c.df.apply(ctx, rdb, &c.cfg, c.log); err != nil {
		return err
	}
	checkHashLimits(ctx, rdb, c.log)
	checkMaxMemory(ctx, rdb, c.log)
	// A worker that sends mail queues the mail of its own events too.
	c.nf.mail = c.nf.mail || c.mf.smtpURL != ""
	if err := c.nf.configure(c.e, rdb, &c.cfg, c.log); err != nil {
		return err
	}
	if err := c.mf.configure(rdb, &c.cfg, c.log); err != nil {
		return err
	}
	if d := c.cfg.Notify.Deliverer; d != nil && c.reg != nil {
		c.cfg.Notify.Deliverer = d.Counting(notify.NewDeliveryCounter(c.reg))
	}
	ledgerConn, err := c.pl.conn(rdb)
	if err != nil {
		return err
	}
	c.cfg.Redis, c.cfg.Ledger, c.cfg.Logger = rdb, ledger.New(ledgerConn), c.log
	return nil
}

// run starts the worker, its callback receiver, the gauge publisher and
// the metrics endpoint, and runs until ctx ends.
func (c *workerCmd) run(ctx context.Context, rdb redis.UniversalClient) error {
	c.cfg.Unsafe = c.e.unsafe.Worker
	w, err := worker.New(c.cfg)
	if err != nil {
		return workerProblems(err)
	}
	if err := c.cb.start(ctx, c.e, w, c.reg, c.log); err != nil {
		return err
	}
	go metrics.Publisher{Redis: rdb, Ledger: c.cfg.Ledger, Interval: c.gaugesEvery, Logger: c.log.With().Str("component", "metrics").Logger()}.Run(ctx)
	if c.metricsAddr != "" {
		stop, err := serveMetrics(ctx, c.metricsAddr, rdb, c.reg, c.log)
		if err != nil {
			return configErr(err)
		}
		defer stop()
	}
	if err := w.Run(ctx); err != nil {
		if errors.Is(err, worker.ErrStopped) {
			return configErr(err)
		}
		return err
	}
	return nil
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
		queue.New(rdb).Collector(), metrics.NewCollector(rdb))
}
