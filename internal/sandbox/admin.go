package sandbox

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/money"
)

// Faults that Force can inject besides plain status codes.
const (
	FaultHang       = "hang"       // no answer until Faults.HangFor passes or the client goes away
	FaultDrop       = "drop"       // the connection is closed after the request was read
	FaultGarbage200 = "garbage200" // 200 with a body that is not JSON
	// FaultH2Reset resets the HTTP/2 stream with PROTOCOL_ERROR after the
	// request was read (over TLS, see Config.TLSCertFile; otherwise the
	// connection is dropped as with FaultDrop).
	FaultH2Reset = "h2reset"
)

// Force forces the next Count answers of the simulator.
type Force struct {
	Status     int    `json:"status,omitempty"`     // HTTP status to answer (201..599)
	Fault      string `json:"fault,omitempty"`      // or one of FaultHang, FaultDrop, FaultGarbage200, FaultH2Reset
	Count      int    `json:"count,omitempty"`      // how many answers; default 1
	RetryAfter string `json:"retryAfter,omitempty"` // Retry-After header to send with Status
	// Store makes a create store the order before the bad answer, as an
	// ambiguous failure would. A forced answer with Store applies only to
	// creates that pass validation.
	Store bool `json:"store,omitempty"`
	// Op limits the forced answer to one operation (OpWithdrawalCreate,
	// OpWithdrawalStatus, OpDepositCreate); "" matches any PSP request.
	Op string `json:"op,omitempty"`
}

func (f Force) label() string {
	if f.Fault != "" {
		return f.Fault
	}
	return strconv.Itoa(f.Status)
}

func (f Force) validate() error {
	switch f.Fault {
	case "":
		if f.Status < 201 || f.Status > 599 {
			return fmt.Errorf("force: status must be within 201..599 (use fault garbage200 for a bad 200), or give a fault")
		}
	case FaultHang, FaultDrop, FaultGarbage200, FaultH2Reset:
		if f.Status != 0 {
			return fmt.Errorf("force: give a status or a fault, not both")
		}
	default:
		return fmt.Errorf("force: unknown fault %q (want hang, drop, garbage200 or h2reset)", f.Fault)
	}
	switch f.Op {
	case "", OpWithdrawalCreate, OpWithdrawalStatus, OpDepositCreate:
	default:
		return fmt.Errorf("force: unknown op %q", f.Op)
	}
	if f.Store && f.Op == OpWithdrawalStatus {
		return fmt.Errorf("force: store applies to creates only")
	}
	if f.Count < 0 {
		return fmt.Errorf("force: count must not be negative")
	}
	return nil
}

// Force queues forced answers; they are used first-in first-out by the
// requests they match.
func (s *Server) Force(f Force) error {
	if f.Count == 0 {
		f.Count = 1
	}
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.forced = append(s.forced, f)
	s.mu.Unlock()
	s.log.Info().Str("answer", f.label()).Int("count", f.Count).Bool("store", f.Store).Str("op", f.Op).Msg("sandbox answer forced")
	return nil
}

// takeForced consumes one forced answer matching op. store selects the
// entries that store the order first (consumed by create handlers after
// validation) or those that do not (consumed before any processing).
func (s *Server) takeForced(op string, store bool) (Force, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeForcedLocked(op, store)
}

func (s *Server) takeForcedLocked(op string, store bool) (Force, bool) {
	if op == "" {
		return Force{}, false // unknown paths are never forced
	}
	for i, f := range s.forced {
		if f.Store != store || (f.Op != "" && f.Op != op) {
			continue
		}
		if store && op == OpWithdrawalStatus {
			continue
		}
		f.Count--
		if f.Count <= 0 {
			s.forced = append(s.forced[:i], s.forced[i+1:]...)
		} else {
			s.forced[i] = f
		}
		return f, true
	}
	return Force{}, false
}

// FaultsJSON is the JSON form of Faults used by the admin API: durations
// as Go duration text ("250ms"), the amount as a decimal string ("" for no
// limit), the outage as "FROM:FOR" ("" for none).
type FaultsJSON struct {
	Forbid        bool    `json:"forbid"`
	MaxAmount     string  `json:"maxAmount"`
	Latency       string  `json:"latency"`
	LatencyJitter string  `json:"latencyJitter"`
	PRefuse       float64 `json:"pRefuse"`
	PAmbiguous    float64 `json:"pAmbiguous"`
	PH2Reset      float64 `json:"pH2Reset"`
	StatusLag     string  `json:"statusLag"`
	Outage        string  `json:"outage"`
	HangFor       string  `json:"hangFor"`
}

func faultsToJSON(f Faults) FaultsJSON {
	j := FaultsJSON{
		Forbid:        f.Forbid,
		Latency:       f.Latency.String(),
		LatencyJitter: f.LatencyJitter.String(),
		PRefuse:       f.PRefuse,
		PAmbiguous:    f.PAmbiguous,
		PH2Reset:      f.PH2Reset,
		StatusLag:     f.StatusLag.String(),
		Outage:        f.Outage.String(),
		HangFor:       f.HangFor.String(),
	}
	if !f.MaxAmount.IsZero() {
		j.MaxAmount = amountText(f.MaxAmount)
	}
	return j
}

func (j FaultsJSON) faults() (Faults, error) {
	var f Faults
	var err error
	f.Forbid, f.PRefuse, f.PAmbiguous, f.PH2Reset = j.Forbid, j.PRefuse, j.PAmbiguous, j.PH2Reset
	dur := func(name, s string) time.Duration {
		if err != nil || strings.TrimSpace(s) == "" {
			return 0
		}
		d, e := time.ParseDuration(strings.TrimSpace(s))
		if e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
		return d
	}
	f.Latency = dur("latency", j.Latency)
	f.LatencyJitter = dur("latencyJitter", j.LatencyJitter)
	f.StatusLag = dur("statusLag", j.StatusLag)
	f.HangFor = dur("hangFor", j.HangFor)
	if err != nil {
		return Faults{}, err
	}
	if f.Outage, err = ParseWindow(j.Outage); err != nil {
		return Faults{}, err
	}
	if m := strings.TrimSpace(j.MaxAmount); m != "" && m != "0" {
		if f.MaxAmount, err = money.Parse(m, 2); err != nil {
			return Faults{}, fmt.Errorf("maxAmount: %w", err)
		}
	}
	return f, f.Validate()
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func (s *Server) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /sandbox/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /sandbox/orders", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Orders())
	})
	mux.HandleFunc("GET /sandbox/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("GET /sandbox/lifecycle", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Lifecycle())
	})
	mux.HandleFunc("POST /sandbox/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]string{"status": "reset"})
	})
	mux.HandleFunc("GET /sandbox/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, faultsToJSON(s.Faults()))
	})
	mux.HandleFunc("PUT /sandbox/faults", s.putFaults)
	mux.HandleFunc("GET /sandbox/force", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		pending := append([]Force{}, s.forced...)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, pending)
	})
	mux.HandleFunc("POST /sandbox/force", s.postForce)
	mux.HandleFunc("DELETE /sandbox/force", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.forced = nil
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"status": "cleared"})
	})
	mux.HandleFunc("GET /sandbox/pay/{id}", s.payPage)
}

// putFaults sets the faults from the JSON body; fields absent from the
// body keep their current value.
func (s *Server) putFaults(w http.ResponseWriter, r *http.Request) {
	j := faultsToJSON(s.Faults())
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		writeError(w, http.StatusBadRequest, "faults: "+err.Error())
		return
	}
	f, err := j.faults()
	if err == nil {
		err = s.SetFaults(f)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, faultsToJSON(s.Faults()))
}

// postForce queues the Force of the JSON body.
func (s *Server) postForce(w http.ResponseWriter, r *http.Request) {
	var f Force
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeError(w, http.StatusBadRequest, "force: "+err.Error())
		return
	}
	if err := s.Force(f); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "forced"})
}

// payPage is the payment form of a deposit order.
func (s *Server) payPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	i, ok := s.byID[id]
	var o Order
	if ok {
		o = s.orders[i]
	}
	s.mu.Unlock()
	if !ok || o.Kind != "deposit" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>Sandbox payment</title><h1>Sandbox payment form</h1><p>Order %s: %s %s</p>\n",
		html.EscapeString(o.PSPOrderID), html.EscapeString(o.Amount), html.EscapeString(o.Currency))
}
