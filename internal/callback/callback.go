// Package callback receives the PSP's callbacks about withdrawal orders.
//
// The PSP's reference shows neither a callback's payload nor a signature,
// so a callback is never proof of anything: it is a hint that an order may
// have changed, and all it does is move that payout's next status query to
// now. The status answer, checked like any other, decides. A duplicated,
// late, reordered, forged or malformed callback therefore changes nothing
// but the timing of a query that was due anyway.
//
// A callback must still carry the shared secret in a header
// (X-Callback-Secret; never in the URL, which access logs keep), compared
// in constant time; a source may be limited to an allowlist of networks. Only
// then is the source's rate limit consulted and the body read, so forged
// traffic neither spends the tokens of the PSP's address nor reaches the
// expensive path. An accepted callback is answered 200 at once and handled
// after.
//
// Refusals and callbacks that change nothing are counted (observe) and
// logged as one summary line per interval (Config.SummaryEvery), never
// one line per request: a flood of forged callbacks must not flood the log.
package callback

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
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
	// DefaultSummaryEvery is how often refused callbacks are summed up in
	// one log line.
	DefaultSummaryEvery = 10 * time.Second
)

// Config configures a Server.
type Config struct {
	Secret  string         // required; never logged
	Header  string         // header that carries the secret; default X-Callback-Secret
	Allow   []netip.Prefix // source networks allowed; empty: any
	MaxBody int64          // bytes; default 64 KiB
	Rate    float64        // authentic callbacks per second per source address (burst twice that); default 50
	// SummaryEvery is the interval of the summary line of refused and
	// ignored callbacks; default DefaultSummaryEvery.
	SummaryEvery time.Duration
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Secret) < 16 {
		errs = append(errs, errors.New("callback secret must be at least 16 characters (PAYOUT_CALLBACK_SECRET)"))
	}
	if c.MaxBody < 0 || c.Rate < 0 || c.SummaryEvery < 0 {
		errs = append(errs, errors.New("callback body limit, rate and summary interval must not be negative"))
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

	tallyMu sync.Mutex
	tally   tally // since the last summary line
}

// tally counts the refused and ignored callbacks of one summary interval.
type tally struct {
	results map[Result]int
	sources map[netip.Addr]int // refused, by source; bounded by maxTallySources
	others  int                // refused from sources past the bound
}

// maxTallySources bounds the sources one summary interval remembers.
const maxTallySources = 1000

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
	if cfg.SummaryEvery == 0 {
		cfg.SummaryEvery = DefaultSummaryEvery
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
	// Authentication first: it costs a header compare, and a forged
	// callback must not spend the rate of the address it claims.
	if !s.authentic(r) {
		s.refuse(w, Unauthorized, http.StatusUnauthorized, src)
		return
	}
	if !s.limiter(src).Allow() {
		s.refuse(w, Limited, http.StatusTooManyRequests, src)
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
		s.count(Malformed, src, false)
		return
	}
	select {
	case s.work <- h:
	default:
		// Hints only speed things up: when they pile up, drop one.
		s.observe(Failed)
	}
}

// refuse answers code and counts the refusal for the metrics and the next
// summary line; it logs nothing itself.
func (s *Server) refuse(w http.ResponseWriter, res Result, code int, src netip.Addr) {
	s.count(res, src, true)
	http.Error(w, http.StatusText(code), code)
}

// count observes res and adds it to the summary; refused ones also count
// for their source.
func (s *Server) count(res Result, src netip.Addr, refused bool) {
	s.observe(res)
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	t := &s.tally
	if t.results == nil {
		t.results = map[Result]int{}
		t.sources = map[netip.Addr]int{}
	}
	t.results[res]++
	if !refused {
		return
	}
	if _, ok := t.sources[src]; ok || len(t.sources) < maxTallySources {
		t.sources[src]++
	} else {
		t.others++
	}
}

// summaryParts name the results of a summary line, in its order; refused
// ones first.
var summaryParts = []struct {
	res     Result
	refused bool
	what    string
}{
	{Unauthorized, true, "bad or missing secret"},
	{Forbidden, true, "source not allowed"},
	{Limited, true, "over the rate"},
	{TooLarge, true, "too large"},
	{Malformed, false, "without an externalId or order id"},
	{NothingToDo, false, "unknown order or nothing waiting"},
}

// summarize logs what was refused or ignored since the last call, in one
// line, and starts counting anew; it logs nothing when nothing was.
func (s *Server) summarize(every time.Duration) {
	s.tallyMu.Lock()
	t := s.tally
	s.tally = tally{}
	s.tallyMu.Unlock()
	var refused, ignored int
	var parts []string
	fields := map[string]any{}
	for _, p := range summaryParts {
		n := t.results[p.res]
		if n == 0 {
			continue
		}
		if p.refused {
			refused += n
		} else {
			ignored += n
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, p.what))
		fields[string(p.res)] = n
	}
	if refused+ignored == 0 {
		return
	}
	msg := fmt.Sprintf("refused %d callbacks in the last %s", refused, every)
	if ignored > 0 {
		msg += fmt.Sprintf(", ignored %d authentic ones", ignored)
	}
	msg += ": " + strings.Join(parts, ", ")
	if top, n := busiest(t.sources); n > 0 {
		fields["busiest_source"], fields["busiest_source_refused"] = top.String(), n
		msg += fmt.Sprintf("; from %d sources, most from %s (%d)", len(t.sources)+t.others, top, n)
	}
	fields["refused"], fields["ignored"] = refused, ignored
	ev := s.log.Warn()
	if refused == 0 {
		ev = s.log.Info() // only authentic callbacks that changed nothing
	}
	ev.Fields(fields).Msg(msg)
}

// busiest returns the source with the most refusals (the smallest address
// on a tie, so the line is stable).
func busiest(m map[netip.Addr]int) (netip.Addr, int) {
	addrs := make([]netip.Addr, 0, len(m))
	for a := range m {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	var top netip.Addr
	n := 0
	for _, a := range addrs {
		if m[a] > n {
			top, n = a, m[a]
		}
	}
	return top, n
}

// authentic reports whether r carries the secret in its header (and only
// there: a secret in the URL, path or query, is written to every access
// log and proxy log on the way, so it is never accepted).
func (s *Server) authentic(r *http.Request) bool {
	got := r.Header.Get(s.cfg.Header)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Secret)) == 1
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
				s.count(NothingToDo, netip.Addr{}, false)
			}
		}
	}
}

// summaries logs the summary line every interval until ctx is done, then
// a last one.
func (s *Server) summaries(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.SummaryEvery)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			s.summarize(time.Since(last).Round(time.Millisecond))
			return
		case last = <-tick.C:
			s.summarize(s.cfg.SummaryEvery)
		}
	}
}

// Serve accepts callbacks on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.wg.Add(2)
	go s.run(ctx)
	go s.summaries(ctx)
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
