// Package ui serves the operator web UI of payout: the finance console
// (/ opens /batches, the batches' progress, JSON at /api/batches; with
// Config.Console each batch's page with its payouts paged on the server and
// its downloads, each payout's history, the work queue at /queue and the
// search of an externalId at /search; see docs/ui.md), the Asynq web UI
// (asynqmon) under /monitoring/, Prometheus metrics at /metrics and a
// health check at /healthz. With Config.Controls, /batches has Approve and Discard for the
// batches awaiting approval, and pauses and resumes made in asynqmon are
// audited; with Config.Uploads, it takes a payout file, previews its
// validation and loads it on confirmation. Every form carries a CSRF token
// of the signed-in user, who is recorded as who acted.
//
// Everything but /healthz is behind single sign-on (the signed-in person
// named by an authenticating proxy's header, believed from the trusted
// proxies only: Config.ProxyUserHeader), HTTP basic auth (one login, or
// named logins from a bcrypt users file, see Users) or a bearer token,
// compared in constant time; a client IP that fails too often is locked out
// (429). Every response carries a strict Content-Security-Policy (per-request
// nonce, nothing from other hosts) and the usual hardening headers. In
// read-only mode asynqmon hides its actions and, independently, every
// non-GET/HEAD request under /monitoring/ is refused with 403. Task payloads,
// results and error messages are shown with card numbers masked
// (card.Scrub), whoever enqueued the task.
package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/httpstatus"
)

// monitoringPath is where asynqmon is mounted.
const monitoringPath = "/monitoring"

// maxBody bounds request bodies (asynqmon's batch actions send task IDs).
const maxBody = 1 << 20

// sharedConn hands asynqmon the caller's Redis client instead of letting it
// dial its own (asynqmon accepts only an asynq.RedisConnOpt). asynqmon's
// Close is never called, so the caller's client is never closed by us.
type sharedConn struct{ c redis.UniversalClient }

func (s sharedConn) MakeRedisClient() interface{} { return s.c }

// scrubPayload shows a payload or result as asynqmon would, with every
// card-like digit run masked.
func scrubPayload(taskType string, b []byte) string {
	return card.Scrub(asynqmon.DefaultPayloadFormatter.FormatPayload(taskType, b))
}

func scrubResult(taskType string, b []byte) string {
	return card.Scrub(asynqmon.DefaultResultFormatter.FormatResult(taskType, b))
}

// New checks cfg (CheckConfig) and returns the UI's handler.
func New(cfg Config) (http.Handler, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, err
	}
	m := newMetrics(cfg.Registry)
	log := cfg.Logger

	mon := asynqmon.New(asynqmon.Options{
		RootPath:          monitoringPath,
		RedisConnOpt:      sharedConn{cfg.Redis},
		PayloadFormatter:  asynqmon.PayloadFormatterFunc(scrubPayload),
		ResultFormatter:   asynqmon.ResultFormatterFunc(scrubResult),
		ReadOnly:          cfg.ReadOnly,
		PrometheusAddress: cfg.PrometheusAddr,
	})

	var gatherer prometheus.Gatherer = prometheus.DefaultGatherer
	if cfg.Registry != nil {
		gatherer = cfg.Registry
	}
	bh, ch, uh := newHandlers(cfg, log)

	app := http.NewServeMux()
	var monitoring http.Handler = logChanges(watchQueues(rewriteMonitoring(mon), cfg.Controls, bh), log)
	if cfg.ReadOnly {
		monitoring = readOnlyGuard(monitoring, log)
	}
	monitoring = roleGuard(monitoring, log)
	app.Handle(monitoringPath+"/", monitoring)
	app.Handle("GET /{$}", http.RedirectHandler("/batches", http.StatusFound))
	app.HandleFunc("GET /batches", bh.page)
	app.HandleFunc("GET /batches/{id}", ch.batchPage)
	app.HandleFunc("GET /batches/{id}/payouts/{ext}", ch.payoutPage)
	app.HandleFunc("POST /batches/{id}/payouts/{ext}/decide", ch.decide)
	app.HandleFunc("GET /batches/{id}/download/{kind}", ch.download)
	app.HandleFunc("GET /queue", ch.queuePage)
	app.HandleFunc("GET /search", ch.searchPage)
	app.HandleFunc("GET /refused", ch.refusedPage)
	app.HandleFunc("GET /webhooks", ch.webhooksPage)
	app.HandleFunc("POST /webhooks/{ep}/redeliver", ch.redeliver)
	app.HandleFunc("GET /refused/{name}", ch.refusedDownload)
	app.HandleFunc("GET /api/batches", bh.api)
	app.HandleFunc("GET /batches/{id}/approve", ch.approveReview)
	app.HandleFunc("POST /batches/{id}/approve", bh.batchAction("Approve", access.Approve, bh.approve))
	app.HandleFunc("POST /batches/{id}/discard", bh.batchAction("Discard", access.Discard, bh.discard))
	app.HandleFunc("POST "+signOutPath, bh.signOut)
	app.HandleFunc("POST "+uploadPath, uh.upload)
	app.HandleFunc("POST /batches/confirm", uh.confirm)
	app.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))

	// Browsers send credentials automatically once logged in: refuse
	// cross-site state-changing requests (CSRF) before they reach asynqmon.
	csrf := http.NewCrossOriginProtection()
	authed := newAuthenticator(cfg, m).wrap(csrf.Handler(limitBody(app)))

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", healthz(cfg.Redis))
	root.Handle("/", authed)
	return securityHeaders(realClient(accessLog(root, log), cfg.TrustedProxies)), nil
}

// newHandlers makes the handlers of the batches page, of the console and
// of the upload, the last two over the first.
func newHandlers(cfg Config, log zerolog.Logger) (*batchHandlers, *consoleHandlers, *uploadHandlers) {
	bh := &batchHandlers{src: cfg.Batches, log: log, now: cfg.now, readOnly: cfg.ReadOnly,
		controls: cfg.Controls, csrf: cfg.csrfTokens(), fourEyes: cfg.FourEyes,
		hasConsole: cfg.Console != nil, hasUploads: cfg.Uploads != nil}
	ch := &consoleHandlers{batchHandlers: bh, console: cfg.Console}
	ch.refused, _ = cfg.Uploads.(RefusedFiles)
	uh := &uploadHandlers{batchHandlers: bh, uploads: cfg.Uploads, uploadLimit: cfg.uploadLimit(),
		uploadSlots: make(chan struct{}, cfg.maxUploads())}
	return bh, ch, uh
}

// Serve listens on cfg.Addr and serves the UI until ctx is done, then shuts
// down gracefully (in-flight requests get up to 10 s). A configuration error
// matches ErrConfig; Redis not answering at start matches
// ErrRedisUnavailable.
func Serve(ctx context.Context, cfg Config) error {
	h, err := New(cfg)
	if err != nil {
		return err
	}
	if err := pingRedis(ctx, cfg.Redis, 5*time.Second); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr())
	if err != nil {
		return &ConfigError{Err: ErrBadAddr, Detail: err.Error()}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	cfg.Logger.Info().Str("addr", ln.Addr().String()).Bool("read_only", cfg.ReadOnly).
		Bool("auth", cfg.hasCredentials()).Stringer("trusted_proxies", prefixes(cfg.TrustedProxies)).
		Msg("ui: serving on http://" + ln.Addr().String() + "/")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("ui: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("ui: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: serve: %w", err)
	}
	cfg.Logger.Info().Msg("ui: stopped")
	return nil
}

// readOnlyGuard refuses every request that is not GET or HEAD, whatever
// asynqmon's own read-only mode does (defence in depth).
func readOnlyGuard(next http.Handler, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			log.Warn().Str("ip", clientIP(r)).Str("method", r.Method).Str("path", r.URL.Path).
				Msg("ui: refused a change in read-only mode")
			http.Error(w, "the UI is read-only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody bounds every request body to maxBody, but the upload's, which
// has its own limit (Config.UploadLimit).
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == uploadPath {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

// healthz answers 200 when Redis answers, 503 otherwise. It needs no
// credentials and says nothing else.
func healthz(c redis.UniversalClient) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := pingRedis(r.Context(), c, 2*time.Second); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("redis unavailable\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// accessLog logs every request at debug level: method, path (no query),
// status, duration and client IP.
// logChanges logs at info every change made through the Asynq web UI (a
// task deleted, archived or run, a queue paused), with the user who made
// it: the record on-call reads when tasks go missing
// (PayoutRepairsFrequent). Reads are not logged; refused changes neither.
func logChanges(next http.Handler, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		sw := &httpstatus.Writer{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.Code == 0 {
			sw.Code = http.StatusOK
		}
		if sw.Code >= 300 {
			return
		}
		log.Info().Str("user", logUser(userFrom(r.Context()))).Str("method", r.Method).
			Str("path", r.URL.Path).Int("status", sw.Code).Msg("ui: change made in the Asynq web UI")
	})
}

func accessLog(next http.Handler, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpstatus.Writer{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.Code == 0 {
			sw.Code = http.StatusOK
		}
		log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.Code).
			Dur("took", time.Since(start)).Str("ip", clientIP(r)).Msg("ui: request")
	})
}

type metrics struct {
	loginFailures *prometheus.CounterVec
	lockouts      prometheus.Counter
}

// newMetrics registers the UI's metrics with reg (or the default registry),
// reusing collectors already registered by an earlier New.
func newMetrics(reg *prometheus.Registry) *metrics {
	var r prometheus.Registerer = prometheus.DefaultRegisterer
	if reg != nil {
		r = reg
	}
	m := &metrics{
		loginFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payout_ui_login_failures_total",
			Help: "Failed logins to the web UI, by scheme (basic, bearer, unsupported).",
		}, []string{"scheme"}),
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payout_ui_lockouts_total",
			Help: "Client IPs locked out of the web UI after repeated failed logins.",
		}),
	}
	if err := r.Register(m.loginFailures); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if c, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				m.loginFailures = c
			}
		}
	}
	if err := r.Register(m.lockouts); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if c, ok := are.ExistingCollector.(prometheus.Counter); ok {
				m.lockouts = c
			}
		}
	}
	return m
}
