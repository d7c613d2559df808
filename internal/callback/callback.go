// Package callback receives the PSP's callbacks about withdrawal orders.
//
// The PSP's reference shows neither a callback's payload nor a signature,
// so a callback is never proof of anything: it is a hint that an order may
// have changed, and all it does is move that payout's next status query to
// now. The status answer, checked like any other, decides. A duplicated,
// late, reordered, forged or malformed callback therefore changes nothing
// but the timing of a query that was due anyway.
//
// A callback must still carry the shared secret (header X-Callback-Secret,
// or as the last path segment: POST /callbacks/SECRET), compared in
// constant time; a source may be limited to an allowlist of networks; the
// body is bounded and each source address is rate-limited. An accepted
// callback is answered 200 at once and handled after.
package callback

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Defaults of Config.
const (
	DefaultHeader  = "X-Callback-Secret"
	DefaultMaxBody = 64 << 10
	DefaultRate    = 50 // callbacks per second and source address
)

// Config configures a Server.
type Config struct {
	Secret  string         // required; never logged
	Header  string         // header that carries the secret; default X-Callback-Secret
	Allow   []netip.Prefix // source networks allowed; empty: any
	MaxBody int64          // bytes; default 64 KiB
	Rate    float64        // callbacks per second per source address (burst twice that); default 50
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Secret) < 16 {
		errs = append(errs, errors.New("callback secret must be at least 16 characters (PAYOUT_CALLBACK_SECRET)"))
	}
	if c.MaxBody < 0 || c.Rate < 0 {
		errs = append(errs, errors.New("callback body limit and rate must not be negative"))
	}
	return errors.Join(errs...)
}

// Hint is what one callback names: an externalId, a PSP order id, or both.
type Hint struct {
	ExternalID string
	OrderID    string
	Status     string // as the callback says; for the log only
}

// Hinter moves the next status query of the payout a hint names to now.
// It reports whether a payout was found that waits for one.
type Hinter interface {
	Hint(ctx context.Context, h Hint) (bool, error)
}

// Result of one callback, for metrics.
type Result string

// The results of a callback.
const (
	Hinted       Result = "hinted"       // a waiting payout's query moved to now
	NothingToDo  Result = "nothing"      // unknown order, or nothing waits
	Malformed    Result = "malformed"    // no externalId or order id in the body
	Forbidden    Result = "forbidden"    // source not in the allowlist
	Unauthorized Result = "unauthorized" // missing or wrong secret
	Limited      Result = "limited"      // over the source's rate
	TooLarge     Result = "too_large"    // body over the limit
	Failed       Result = "failed"       // the hint could not be applied (Redis)
)

// Server is the callback endpoint.
type Server struct {
	cfg     Config
	hinter  Hinter
	log     zerolog.Logger
	observe func(Result)

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	work     chan Hint
	wg       sync.WaitGroup
}

// New builds a Server; observe (may be nil) counts results.
func New(cfg Config, h Hinter, log zerolog.Logger, observe func(Result)) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Header == "" {
		cfg.Header = DefaultHeader
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if observe == nil {
		observe = func(Result) {}
	}
	return &Server{cfg: cfg, hinter: h, log: log, observe: observe,
		limiters: map[string]*rate.Limiter{}, work: make(chan Hint, 1024)}, nil
}

// ServeHTTP answers one callback.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	src := sourceAddr(r.RemoteAddr)
	if !s.allowed(src) {
		s.refuse(w, Forbidden, http.StatusForbidden, src)
		return
	}
	if !s.limiter(src).Allow() {
		s.refuse(w, Limited, http.StatusTooManyRequests, src)
		return
	}
	if !s.authentic(r) {
		s.refuse(w, Unauthorized, http.StatusUnauthorized, src)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	if err != nil {
		s.refuse(w, Malformed, http.StatusBadRequest, src)
		return
	}
	if int64(len(body)) > s.cfg.MaxBody {
		s.refuse(w, TooLarge, http.StatusRequestEntityTooLarge, src)
		return
	}
	// Authentic: answered 200 whatever it says, so the PSP does not send
	// it again; what it says is only a hint.
	w.WriteHeader(http.StatusOK)
	h, ok := parse(body)
	if !ok {
		s.observe(Malformed)
		s.log.Warn().Str("source", src.String()).Msg("callback without an externalId or order id ignored")
		return
	}
	select {
	case s.work <- h:
	default:
		// Hints only speed things up: when they pile up, drop one.
		s.observe(Failed)
	}
}

func (s *Server) refuse(w http.ResponseWriter, res Result, code int, src netip.Addr) {
	s.observe(res)
	s.log.Warn().Str("source", src.String()).Str("result", string(res)).Msg("callback refused")
	http.Error(w, http.StatusText(code), code)
}

func (s *Server) authentic(r *http.Request) bool {
	got := r.Header.Get(s.cfg.Header)
	if got == "" {
		if i := strings.LastIndexByte(r.URL.Path, '/'); i >= 0 {
			got = r.URL.Path[i+1:]
		}
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Secret)) == 1
}

func (s *Server) allowed(src netip.Addr) bool {
	if len(s.cfg.Allow) == 0 {
		return true
	}
	for _, p := range s.cfg.Allow {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// maxLimiters bounds the per-source table; past it, the table starts over.
const maxLimiters = 10000

func (s *Server) limiter(src netip.Addr) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := src.String()
	l, ok := s.limiters[k]
	if !ok {
		if len(s.limiters) >= maxLimiters {
			s.limiters = map[string]*rate.Limiter{}
		}
		l = rate.NewLimiter(rate.Limit(s.cfg.Rate), int(2*s.cfg.Rate)+1)
		s.limiters[k] = l
	}
	return l
}

func sourceAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// parse reads the ids a callback names, whatever the case of its keys.
func parse(body []byte) (Hint, bool) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return Hint{}, false
	}
	var h Hint
	for k, v := range m {
		s, ok := v.(string) // the ids we send are strings
		if !ok {
			continue
		}
		switch strings.ToLower(k) {
		case "externalid", "external_id", "externaltransactionid":
			h.ExternalID = s
		case "pspdepositorderid", "orderid", "order_id", "id":
			h.OrderID = s
		case "status", "orderstatus":
			h.Status = s
		}
	}
	return h, h.ExternalID != "" || h.OrderID != ""
}

// run handles accepted callbacks until ctx is done; Serve starts it.
func (s *Server) run(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-s.work:
			hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ok, err := s.hinter.Hint(hctx, h)
			cancel()
			switch {
			case err != nil:
				s.observe(Failed)
				s.log.Warn().Err(err).Str("externalId", h.ExternalID).Msg("callback hint not applied")
			case ok:
				s.observe(Hinted)
				s.log.Debug().Str("externalId", h.ExternalID).Str("status", h.Status).Msg("callback: status query moved to now")
			default:
				s.observe(NothingToDo)
			}
		}
	}
}

// Serve accepts callbacks on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.wg.Add(1)
	go s.run(ctx)
	mux := http.NewServeMux()
	mux.Handle("/", s)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
