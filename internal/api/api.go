// Package api is payout's HTTP API for the systems that pay (an ERP's
// payment run, a marketplace's balances): /api/v1, described by the
// OpenAPI 3.1 document openapi.yaml (docs/openapi.yaml, served at
// /api/v1/openapi.json), served by `payout api`.
//
// It adds no rule of its own: a batch is created from JSON items by
// writing them, streaming, as the rows of a CSV payout file and loading
// that file with package loader (the file intake's rules, limits and
// all-or-nothing; each error mapped back to its item's index and field),
// or from a CSV or XLSX payout file sent as the body, staged and loaded
// as the console's upload is (upload.go);
// every action is the internal/operator command the CLI and the console
// run, its *Refusal kinds mapped to HTTP statuses; the reads are the
// console's (operator.Console over package view). What it adds is the
// HTTP around them: API tokens (stored hashed, each with a role of
// package access, acting as "token:NAME" in the audit trail), a rate
// limit per token, Idempotency-Key on every POST, RFC 9457 problem
// details, cursor paging, bounded request bodies.
package api

import (
	"context"
	"net/http"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Defaults of Config.
const (
	DefaultMaxBody  = 32 << 20 // bytes of a create request: 15,000 items of about 2 KB
	DefaultMaxItems = 15000
	DefaultRate     = 20 // requests per second per token
	// DefaultIdemTTL is how long an answer is kept for its
	// Idempotency-Key (at least 24 hours, as integrators expect).
	DefaultIdemTTL = 24 * time.Hour
	// DefaultIdemLease bounds how long a request that died halfway blocks
	// its key (409); the running request renews it.
	DefaultIdemLease = 30 * time.Second
	maxActionBody    = 64 << 10
)

// Config is what Server needs.
type Config struct {
	Redis   redis.UniversalClient
	Actions *operator.Actions
	Console operator.Console
	Loader  *loader.Loader
	// Load is how batches are loaded (file options, approval rule); the
	// approval's By is the token's identity.
	Load loader.Options
	// FourEyes, DailyLimit, PSP and OutcomeWindow are the actions'
	// checks, as payout ui's (operator.UIControls).
	FourEyes      bool
	DailyLimit    money.Amount
	PSP           operator.StatusChecker
	OutcomeWindow time.Duration
	// Staging is the folder the items of a create are written to as a
	// CSV file while it is loaded ("": os.TempDir()).
	Staging  string
	MaxBody  int64 // bytes of a request body (0: DefaultMaxBody)
	MaxItems int   // items of a create (0: DefaultMaxItems)
	Rate     int   // requests per second per token (0: DefaultRate)
	IdemTTL  time.Duration
	Lease    time.Duration
	Log      zerolog.Logger
	Now      func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxItems <= 0 {
		c.MaxItems = DefaultMaxItems
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.IdemTTL < DefaultIdemTTL {
		c.IdemTTL = DefaultIdemTTL
	}
	if c.Lease <= 0 {
		c.Lease = DefaultIdemLease
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Console.Ledger == nil {
		c.Console = operator.NewConsole(c.Redis)
		c.Console.Queue = c.Redis
	}
	if c.Actions == nil {
		c.Actions = operator.New(c.Redis, nil, c.Log)
	}
	return c
}

// Server serves /api/v1.
type Server struct {
	cfg     Config
	tokens  Tokens
	limiter *redis_rate.Limiter
	spec    []byte // the OpenAPI document as JSON
}

// New returns the Server of cfg; it fails only on a broken embedded spec.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	spec, err := SpecJSON()
	if err != nil {
		return nil, err
	}
	if cfg.Console.Ledger == nil {
		cfg.Console.Ledger = ledger.New(cfg.Redis)
	}
	return &Server{cfg: cfg, tokens: NewTokens(cfg.Redis), limiter: redis_rate.NewLimiter(cfg.Redis), spec: spec}, nil
}

// handlerFunc is a handler of an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p access.Principal) error

// Handler is the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/openapi.json", s.openAPI)
	read := func(pattern string, h handlerFunc) { mux.Handle(pattern, s.auth(access.Read, h)) }
	post := func(pattern string, a access.Action, h handlerFunc) {
		mux.Handle(pattern, s.auth(a, s.idempotent(h)))
	}
	read("GET /api/v1/batches", s.listBatches)
	read("GET /api/v1/batches/{batchId}", s.getBatch)
	read("GET /api/v1/batches/{batchId}/payouts", s.listPayouts)
	read("GET /api/v1/payouts/{externalId}", s.getPayout)
	read("GET /api/v1/batches/{batchId}/files/{kind}", s.download)
	post("POST /api/v1/batches", access.Load, s.createBatch)
	post("POST /api/v1/batches/{batchId}/approve", access.Approve, s.approve)
	post("POST /api/v1/batches/{batchId}/discard", access.Discard, s.discard)
	post("POST /api/v1/batches/{batchId}/payouts/{externalId}/cancel", access.Cancel, s.cancel)
	post("POST /api/v1/batches/{batchId}/payouts/{externalId}/recheck", access.Recheck, s.recheck)
	post("POST /api/v1/batches/{batchId}/payouts/{externalId}/mark-created", access.MarkCreated, s.markCreated)
	post("POST /api/v1/batches/{batchId}/payouts/{externalId}/mark-rejected", access.MarkRejected, s.markRejected)
	post("POST /api/v1/queue/pause", access.Pause, s.pause)
	post("POST /api/v1/queue/resume", access.Resume, s.resume)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		newProblem(KindNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path+" (see /api/v1/openapi.json)").write(w)
	})
	return mux
}

// Serve listens on addr until ctx ends.
func (s *Server) Serve(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	s.cfg.Log.Info().Str("addr", addr).Msg("api: serving /api/v1")
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
