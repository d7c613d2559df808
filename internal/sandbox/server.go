package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	stdlog "log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/payout/internal/httpstatus"
	"github.com/acme/payout/internal/sandbox/h2rst"
	"github.com/rs/zerolog"
)

// PSP paths served by the simulator. They are written out here rather than
// taken from the client package, so that the client's tests against the
// simulator would catch a wrong path in the client.
const (
	pathWithdrawal = "/api/v1/integration/bridge/withdrawal-order"
	pathDeposit    = "/api/v1/integration/deposit-order"
	maxBody        = 1 << 20
)

// Operation names, as used in Force.Op and the logs.
const (
	OpWithdrawalCreate = "withdrawal_create"
	OpWithdrawalStatus = "withdrawal_status"
	OpDepositCreate    = "deposit_create"
)

// Property is one key/value entry of an order.
type Property struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Order is an order stored by the simulator. It never holds a full card
// number: card numbers are masked before the order is stored.
type Order struct {
	Kind       string     `json:"kind"` // "withdrawal" or "deposit"
	PSPOrderID string     `json:"pspOrderId"`
	ExternalID string     `json:"externalId"`
	Amount     string     `json:"amount"`
	Currency   string     `json:"currency,omitempty"`
	Properties []Property `json:"properties"`
	// Status is the order's status now ("Created", "Processing", then the
	// paid or failed word), StatusReason why it failed, once it has.
	Status       string    `json:"status"`
	StatusReason string    `json:"statusReason,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	// FinalStatus, FinalReason and FinalAt are the truth decided at
	// creation: the status the order ends with, and when. Without a
	// lifecycle (Config.SettleAfter 0) a withdrawal stays "Created": FinalAt
	// is zero (omitted) and FinalStatus "Created". Deposits have none.
	FinalStatus string    `json:"finalStatus,omitempty"`
	FinalReason string    `json:"finalReason,omitempty"`
	FinalAt     time.Time `json:"finalAt,omitzero"`
	// ReturnAt is when a paid order reports that its money came back
	// (Config.PReturn), with ReturnReason; zero: never.
	ReturnAt     time.Time `json:"returnAt,omitzero"`
	ReturnStatus string    `json:"returnStatus,omitempty"`
	ReturnReason string    `json:"returnReason,omitempty"`
	// ReturnedAt is the time of the return, once the order reports it.
	ReturnedAt string `json:"returnedAt,omitempty"`
	// Answer is what the client was told when the order was created: "200",
	// or the bad answer of an ambiguous failure ("500", "hang", "drop"...).
	Answer string `json:"answer"`
}

// Stats are the simulator's counters since start or the last Reset.
type Stats struct {
	CreatesReceived     int            `json:"createsReceived"`     // withdrawal creates (POSTs) received
	CreatesByExternalID map[string]int `json:"createsByExternalId"` // withdrawal creates per externalId
	OrdersStored        int            `json:"ordersStored"`        // withdrawal orders stored
	DepositsReceived    int            `json:"depositsReceived"`
	DepositsStored      int            `json:"depositsStored"`
	StatusQueries       int            `json:"statusQueries"`
	// H2Resets counts creates whose order was stored and whose HTTP/2
	// stream was then reset (PROTOCOL_ERROR) instead of answered.
	H2Resets int `json:"h2_resets"`
	// Answers counts PSP answers by HTTP status code ("200", "503", ...),
	// or "hang" / "drop" for those faults.
	Answers  map[string]int `json:"answers"`
	InFlight int            `json:"inFlight"` // PSP requests being handled now
	Seed     int64          `json:"seed"`
	// Paid and Failed count the withdrawal orders whose status is now the
	// paid or the failed word.
	Paid   int `json:"paid"`
	Failed int `json:"failed"`
	// Returned counts the paid orders whose money came back since
	// (Config.PReturn): their status is now the returned word.
	Returned int `json:"returned,omitempty"`
	// CallbacksSent counts deliveries answered 2xx (a duplicate counts
	// twice), CallbacksFailed deliveries dropped after their retries.
	CallbacksSent   int `json:"callbacksSent"`
	CallbacksFailed int `json:"callbacksFailed"`
}

// Server is the PSP simulator. Its methods are safe for concurrent use.
type Server struct {
	log   zerolog.Logger
	token string
	start time.Time
	cfg   Config // for the TLS settings of Serve

	stopOnce sync.Once
	stop     chan struct{} // closed on shutdown: ends hangs

	inflight atomic.Int64

	mu     sync.Mutex
	seed   int64
	rng    *mrand.Rand
	faults Faults
	orders []Order
	byID   map[string]int   // PSP order id -> index in orders
	byExt  map[string][]int // externalId -> indexes of its withdrawal orders, oldest first
	forced []Force
	stats  Stats

	clock   Clock
	lifeRng *mrand.Rand // failure draws and reasons, apart from the faults' source
	cb      callbacks
}

// New builds a simulator. Invalid knobs are clamped into range (callers
// that take user input call cfg.Validate first).
func New(cfg Config, log zerolog.Logger) *Server {
	if strings.TrimSpace(cfg.Token) == "" {
		cfg.Token = DefaultToken
	}
	if cfg.HangFor <= 0 {
		cfg.HangFor = DefaultHangFor
	}
	if cfg.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Seed = int64(binary.LittleEndian.Uint64(b[:]) >> 1)
		if cfg.Seed == 0 {
			cfg.Seed = 1
		}
	}
	cfg = lifecycleDefaults(cfg)
	s := &Server{
		log:    log,
		token:  strings.TrimSpace(cfg.Token),
		clock:  cfg.Clock,
		start:  cfg.Clock.Now(),
		stop:   make(chan struct{}),
		seed:   cfg.Seed,
		faults: clamp(cfg.Faults),
		cfg:    cfg,
		cb:     callbacks{enabled: cfg.CallbackURL != ""},
	}
	s.resetLocked()
	return s
}

func clamp(f Faults) Faults {
	f.PRefuse = min(max(f.PRefuse, 0), 1)
	f.PAmbiguous = min(max(f.PAmbiguous, 0), 1)
	f.PH2Reset = min(max(f.PH2Reset, 0), 1)
	f.Latency = max(f.Latency, 0)
	f.LatencyJitter = max(f.LatencyJitter, 0)
	f.StatusLag = max(f.StatusLag, 0)
	if f.HangFor <= 0 {
		f.HangFor = DefaultHangFor
	}
	return f
}

func (s *Server) resetLocked() {
	s.rng = mrand.New(mrand.NewPCG(uint64(s.seed), 0x5eed))
	s.lifeRng = mrand.New(mrand.NewPCG(uint64(s.seed), 0x11fe))
	s.cb.resetLocked(s.seed)
	s.orders = nil
	s.byID = map[string]int{}
	s.byExt = map[string][]int{}
	s.forced = nil
	s.stats = Stats{CreatesByExternalID: map[string]int{}, Answers: map[string]int{}}
}

// Reset forgets orders, counters and forced answers, and re-seeds the
// random source. The fault knobs and the outage clock are kept.
func (s *Server) Reset() {
	s.mu.Lock()
	s.resetLocked()
	s.mu.Unlock()
	s.log.Info().Msg("sandbox reset")
}

// Orders returns a copy of the stored orders, oldest first.
func (s *Server) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	out := make([]Order, len(s.orders))
	for i, o := range s.orders {
		o.Properties = append([]Property(nil), o.Properties...)
		out[i] = o.at(now)
	}
	return out
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.CreatesByExternalID = make(map[string]int, len(s.stats.CreatesByExternalID))
	for k, v := range s.stats.CreatesByExternalID {
		st.CreatesByExternalID[k] = v
	}
	st.Answers = make(map[string]int, len(s.stats.Answers))
	for k, v := range s.stats.Answers {
		st.Answers[k] = v
	}
	st.InFlight = int(s.inflight.Load())
	st.Seed = s.seed
	now := s.clock.Now()
	for _, o := range s.orders {
		switch o.at(now).Status {
		case s.cfg.PaidStatus:
			st.Paid++
		case s.cfg.FailedStatus:
			st.Failed++
		case s.cfg.ReturnedStatus:
			st.Returned++
		}
	}
	return st
}

// Faults returns the current fault knobs.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the fault knobs.
func (s *Server) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = clamp(f)
	s.mu.Unlock()
	s.log.Info().Interface("faults", faultsToJSON(f)).Msg("sandbox faults changed")
	return nil
}

// Handler serves the PSP API and the admin API.
func (s *Server) Handler() http.Handler {
	psp := http.NewServeMux()
	psp.HandleFunc("POST "+pathWithdrawal, s.handleCreateWithdrawal)
	psp.HandleFunc("GET "+pathWithdrawal+"/{id...}", s.handleStatus)
	psp.HandleFunc("POST "+pathDeposit, s.handleCreateDeposit)
	psp.HandleFunc("POST "+pathDeposit+"/{$}", s.handleCreateDeposit)

	root := http.NewServeMux()
	s.registerAdmin(root)
	root.Handle("/", s.pspMiddleware(psp))
	return root
}

// Serve serves on ln until ctx is done, then shuts down gracefully: hangs
// end at once, requests in progress get 5 seconds. With Config.TLSCertFile
// it speaks TLS on ln, HTTP/2 or HTTP/1.1 as the client chooses by ALPN.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          stdlog.New(s.log.With().Str("component", "http").Logger(), "", 0),
	}
	scheme := "http"
	if s.cfg.TLSCertFile != "" {
		tcfg, err := serverTLS(s.cfg, ln.Addr())
		if err != nil {
			return err
		}
		// The simulator does the TLS itself (h2rst.Listener), so the HTTP
		// server sees plain connections: HTTP/1.1, or HTTP/2 after its
		// preface.
		ln = h2rst.Listener{Listener: ln, Config: tcfg}
		srv.Handler = withTLSState(srv.Handler)
		srv.ConnContext = connContext
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		scheme = "https"
	}
	s.log.Info().Str("addr", ln.Addr().String()).Str("scheme", scheme).Int64("seed", s.seed).
		Interface("faults", faultsToJSON(s.Faults())).Interface("lifecycle", s.Lifecycle()).Msg("psp sandbox listening")
	cctx, stopCallbacks := context.WithCancel(ctx)
	cbDone := make(chan struct{})
	go func() { defer close(cbDone); s.RunCallbacks(cctx) }()
	defer func() { stopCallbacks(); <-cbDone }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.stopOnce.Do(func() { close(s.stop) })
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	s.log.Info().Msg("psp sandbox stopped")
	return nil
}

// recorder captures the status of an answer, or the fault that replaced it.
type recorder struct {
	httpstatus.Writer
	fault string // "hang" or "drop"
}

// Unwrap lets http.ResponseController reach Hijack and Flush.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) answer() string {
	if r.fault != "" {
		return r.fault
	}
	if r.Code == 0 {
		return "200"
	}
	return strconv.Itoa(r.Code)
}
