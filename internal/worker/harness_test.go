package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testlog"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// harness is one worker against one Redis and one PSP simulator served over
// loopback.
type harness struct {
	t       *testing.T
	rdb     redis.UniversalClient
	ledger  *ledger.Ledger
	sbx     *sandbox.Server
	url     string
	ring    *vault.Keyring
	queue   *queue.Queue
	insp    *asynq.Inspector
	cfg     Config
	psp     PSP
	logs    *syncBuffer
	batch   string
	added   int // payouts added so far: externalIds stay unique across batches
	stopped chan struct{}
	cancel  context.CancelFunc
	// runErr is what the worker's Run returned, once stopped is closed;
	// a *StopError (the worker stopped itself) fails the test unless
	// expectStop.
	runErr     error
	expectStop bool

	// workerRDB, when set, is the worker's Redis client instead of rdb (a
	// client through a fault proxy); the harness's own calls keep rdb.
	workerRDB redis.UniversalClient
}

// fastConfig shrinks every delay so that a resolution takes a second or so.
func fastConfig() Config {
	c := DefaultConfig()
	c.Concurrency = 8
	c.StatusDelay = 50 * time.Millisecond
	c.Policy.AbsentSpacing = 100 * time.Millisecond
	c.PauseRetry = 100 * time.Millisecond
	c.BreakerCooldown = 200 * time.Millisecond
	c.PollInterval = 50 * time.Millisecond
	c.ShutdownTimeout = 2 * time.Second
	c.TrustStatusByExternal = true // the simulator finds orders by externalId
	return c
}

func newHarness(t *testing.T, cfg Config, sc sandbox.Config) *harness {
	t.Helper()
	opt, err := redis.ParseURL(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	if sc.Token == "" {
		sc.Token = sandbox.DefaultToken
	}
	if sc.HangFor == 0 {
		sc.HangFor = 5 * time.Second
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	sbx := sandbox.New(sc, log.With().Str("component", "sandbox").Logger())
	srv := httptest.NewServer(sbx.Handler())
	t.Cleanup(srv.Close)
	h := &harness{
		t: t, rdb: rdb, ledger: ledger.New(rdb), sbx: sbx, url: srv.URL, ring: vault.Ephemeral(),
		queue: queue.New(rdb), insp: asynq.NewInspectorFromRedisClient(rdb),
		cfg: cfg, logs: logs, batch: "testbatch",
	}
	h.psp = h.newClient(srv.URL, 500*time.Millisecond)
	return h
}

func (h *harness) newClient(url string, timeout time.Duration) *psp.Client {
	c, err := psp.New(psp.Config{BaseURL: url, Token: psp.StaticToken(sandbox.DefaultToken), Timeout: timeout,
		Logger: zerolog.New(h.logs)})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// add registers payouts with the given card numbers (or "tel:X") and
// amounts, and enqueues their create tasks, as the loader does.
func (h *harness) add(dests ...string) []string {
	h.t.Helper()
	ctx := context.Background()
	if _, _, err := h.ledger.BeginBatch(ctx, ledger.Batch{ID: h.batch, File: "t.csv", LoadedAt: time.Now(), Rows: int64(len(dests)), Total: money.Zero, Scale: 2}); err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	var ps []ledger.NewPayout
	for i, d := range dests {
		ext := fmt.Sprintf("PO-%d", h.added+i+1)
		ids = append(ids, ext)
		p := ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.50")}
		if len(d) > 4 && d[:4] == "tel:" {
			p.Telecom, p.Destination = d[4:], "telecom "+d[4:]
		} else {
			sealed, err := h.ring.Seal(d, ledger.SealAD(h.batch, ext))
			if err != nil {
				h.t.Fatal(err)
			}
			p.Sealed, p.Destination = sealed, "card "+d[:6]+"..."
		}
		ps = append(ps, p)
	}
	h.added += len(dests)
	if _, err := h.ledger.Register(ctx, h.batch, ps, 2); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.FinishBatch(ctx, h.batch); err != nil { // as the loader does, before any task
		h.t.Fatal(err)
	}
	for _, p := range ps {
		if _, err := h.queue.Add(ctx, queue.Step{Kind: queue.Create, Batch: h.batch, ExternalID: p.ExternalID, N: 1, Amount: p.Amount.String(), Destination: p.Destination}); err != nil {
			h.t.Fatal(err)
		}
	}
	return ids
}

// worker builds a Worker on the harness's PSP and keyring.
func (h *harness) worker(rdb redis.UniversalClient, l *ledger.Ledger, cfg Config, log zerolog.Logger) *Worker {
	h.t.Helper()
	cfg.Redis, cfg.Ledger, cfg.PSP, cfg.Opener, cfg.Logger = rdb, l, h.psp, h.ring, log
	w, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

func (h *harness) start() {
	h.t.Helper()
	// The worker's ledger transitions go through autopipelining, as
	// payout worker's do by default (--redis-pipeline).
	rdb := h.rdb
	if h.workerRDB != nil {
		rdb = h.workerRDB
	}
	ap, err := rdb.AutoPipeline()
	if err != nil {
		h.t.Fatal(err)
	}
	w := h.worker(rdb, ledger.New(ap), h.cfg, testLogger(h))
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.stopped = make(chan struct{})
	go func() {
		defer close(h.stopped)
		h.runErr = w.Run(ctx)
		if h.runErr != nil && !(h.expectStop && errors.Is(h.runErr, ErrStopped)) {
			h.t.Errorf("worker: %v", h.runErr)
		}
	}()
	h.t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.stopped
		h.cancel = nil
	}
}

// waitFor polls cond until it holds or the deadline passes.
func (h *harness) waitFor(what string, within time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %s waiting for %s\nlogs:\n%s", within, what, h.logs.Tail(40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFinal waits until no payout of the batch is open.
func (h *harness) waitFinal(within time.Duration) ledger.Counts {
	h.t.Helper()
	var c ledger.Counts
	h.waitFor("every payout final", within, func() bool {
		var err error
		c, err = view.New(h.ledger.Redis()).Counts(context.Background(), h.batch)
		return err == nil && c.Total() > 0 && c.Open() == 0
	})
	return c
}

func (h *harness) payout(ext string) ledger.Payout {
	h.t.Helper()
	p, err := h.ledger.Get(context.Background(), h.batch, ext)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) force(f sandbox.Force) {
	h.t.Helper()
	if err := h.sbx.Force(f); err != nil {
		h.t.Fatal(err)
	}
}

// selfStopped reports whether the worker's Run returned (it stopped
// itself: the harness did not cancel it).
func (h *harness) selfStopped() bool {
	select {
	case <-h.stopped:
		return true
	default:
		return false
	}
}

// authFaultElsewhere records that another worker process had its PSP
// credentials refused just now (what a second worker's recheck reports).
func (h *harness) authFaultElsewhere() {
	h.t.Helper()
	if _, err := reportAuthFault(context.Background(), h.ledger.Redis(), "other-host:4242", h.cfg.withDefaults().AuthConfirmWindow); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) paused() bool {
	info, err := h.insp.GetQueueInfo(jobs.Queue)
	return err == nil && info.Paused
}

// assertOrders checks the simulator's view: POSTs received and orders
// stored for ext.
func (h *harness) assertOrders(ext string, posts, stored int) {
	h.t.Helper()
	st := h.sbx.Stats()
	if got := st.CreatesByExternalID[ext]; got != posts {
		h.t.Errorf("%s: PSP received %d creates, want %d", ext, got, posts)
	}
	n := 0
	for _, o := range h.sbx.Orders() {
		if o.ExternalID == ext {
			n++
		}
	}
	if n != stored {
		h.t.Errorf("%s: PSP stored %d orders, want %d", ext, n, stored)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testlog.Buffer

// closedPortURL is a URL where nothing listens: every request fails to dial.
func closedPortURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func testLogger(h *harness) zerolog.Logger { return zerolog.New(h.logs).Level(zerolog.DebugLevel) }
