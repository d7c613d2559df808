// Package sandbox is a simulator of the payment service (PSP) with fault
// injection, a product feature for the demo (payout run --sandbox, payout
// sandbox, payout dev, cmd/psp-sandbox) that development and the tests of
// the payout workers use too.
//
// It ships in the payout binary on purpose: a person tries payout end to
// end without a PSP account. Its HTTP/2 stream resets are in the
// subpackage h2rst.
//
// It speaks the three operations of the PSP API (withdrawal create,
// withdrawal status, deposit create) with bearer auth and the request and
// answer bodies of the reference, and like a real PSP it does NOT
// deduplicate: every accepted create stores a new order.
//
// # Magic values
//
//   - Card [DeclinedCard] (4000000000000002, Luhn-valid) is declined: a
//     withdrawal answers 422, a deposit 400.
//   - Amount [RefusedAmount] (13.13) is refused as invalid: 400.
//
// # Faults
//
// The knobs of [Faults] (and [Config]) inject answers a real PSP gives on a
// bad day: latency, 423 before storing (PRefuse), an order stored and then a
// bad answer (PAmbiguous: 500, 502, 503, 423, a hang or a dropped
// connection, picked uniformly), an order stored and then its HTTP/2 stream
// reset with PROTOCOL_ERROR (PH2Reset, over TLS: see Config.TLSCertFile), a
// status lag (new orders answer 404 to
// status queries for a while), an outage window (every PSP request answers
// 503), a forbidden account (403). All randomness comes from one source
// seeded with Config.Seed and guarded by a mutex, so a sequential run is
// reproducible.
//
// # Lifecycle
//
// With Config.SettleAfter D > 0 a stored withdrawal order, whatever answer
// its create got (200, an ambiguous failure, a reset stream), answers
// status "Created" at first, "Processing" from D/2 after its creation,
// and its final word from D: Config.PaidStatus ("Paid"), or for a share
// Config.PFail of orders drawn at creation (from a seeded source of its
// own) Config.FailedStatus ("Failed") with a "statusReason" (one of
// FailReasons). The status is computed from the simulator's clock
// (Config.Clock) when read. With D = 0 orders stay "Created".
//
// # Callbacks
//
// With Config.CallbackURL, each status change (Processing, final) is
// POSTed there as {"externalId","pspDepositOrderID","status"} plus
// "statusReason" for a failure, with the header X-Callback-Secret. A share
// PCallbackDup is sent twice, each delivery waits a random
// 0..CallbackDelay (so they may arrive out of order), a failed delivery is
// retried CallbackRetries times with doubling backoff and then dropped.
// RunCallbacks (started by Serve) sends them, at most CallbackConcurrency
// at a time.
//
// # Admin API
//
// Outside the PSP paths, without auth (bind the simulator to loopback):
//
//	GET    /sandbox/health   "ok"
//	GET    /sandbox/orders   stored orders, card numbers masked, with their
//	                         status now and their final status (see Order)
//	GET    /sandbox/stats    counters (see Stats)
//	GET    /sandbox/lifecycle the lifecycle settings (see LifecycleJSON)
//	POST   /sandbox/reset    forget orders, counters and forced answers; re-seed
//	GET    /sandbox/faults   the fault knobs (see FaultsJSON)
//	PUT    /sandbox/faults   change some knobs: fields absent keep their value
//	GET    /sandbox/force    pending forced answers
//	POST   /sandbox/force    force the next answers, e.g.
//	                         {"status":429,"count":1,"retryAfter":"2"}
//	                         {"fault":"hang"|"drop"|"garbage200"|"h2reset","count":1,"store":true}
//	                         optional "op": withdrawal_create, withdrawal_status,
//	                         deposit_create (default: any PSP request)
//	DELETE /sandbox/force    drop pending forced answers
//	GET    /sandbox/pay/{id} the payment form a deposit's formUrl points to
package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/money"
)

// Magic values of the simulator.
const (
	// DeclinedCard is a Luhn-valid card number that the simulator declines.
	DeclinedCard = "4000000000000002"
	// RefusedAmount is an amount that the simulator refuses as invalid (400).
	RefusedAmount = "13.13"
	// DefaultToken is the bearer token accepted when none is configured.
	DefaultToken = "sandbox-token"
	// DefaultHangFor is how long a "hang" lasts unless the client goes away.
	DefaultHangFor = 2 * time.Minute
)

// Window is a span of time relative to the start of the server.
type Window struct {
	From time.Duration
	For  time.Duration
}

// IsZero reports whether the window is empty (no outage).
func (w Window) IsZero() bool { return w.For <= 0 }

// Contains reports whether elapsed (time since the server started) falls in
// the window.
func (w Window) Contains(elapsed time.Duration) bool {
	return w.For > 0 && elapsed >= w.From && elapsed < w.From+w.For
}

// String is the FROM:FOR form, "" for no window.
func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	return w.From.String() + ":" + w.For.String()
}

// ParseWindow reads FROM:FOR, two Go durations ("10s:30s"). "" is no window.
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Window{}, nil
	}
	from, dur, ok := strings.Cut(s, ":")
	if !ok {
		return Window{}, fmt.Errorf("outage %q: want FROM:FOR, e.g. 10s:30s", s)
	}
	f, err := time.ParseDuration(strings.TrimSpace(from))
	if err != nil {
		return Window{}, fmt.Errorf("outage %q: FROM: %w", s, err)
	}
	d, err := time.ParseDuration(strings.TrimSpace(dur))
	if err != nil {
		return Window{}, fmt.Errorf("outage %q: FOR: %w", s, err)
	}
	if f < 0 || d < 0 {
		return Window{}, fmt.Errorf("outage %q: durations must not be negative", s)
	}
	return Window{From: f, For: d}, nil
}

// Faults are the knobs that may change while the simulator runs.
type Faults struct {
	Forbid        bool          // answer 403 to every authenticated request
	MaxAmount     money.Amount  // zero: no limit; above it a withdrawal answers 422
	Latency       time.Duration // added before every PSP answer
	LatencyJitter time.Duration // plus a uniform random part in [0, LatencyJitter]
	PRefuse       float64       // probability of a 423 before storing anything
	PAmbiguous    float64       // probability of storing, then answering badly
	PH2Reset      float64       // probability of storing a create, then resetting its HTTP/2 stream (PROTOCOL_ERROR) instead of answering
	StatusLag     time.Duration // a new order answers 404 to status queries for that long
	Outage        Window        // every PSP request answers 503 in this window
	HangFor       time.Duration // how long a hang lasts (or until the client goes away)
}

// Validate checks the ranges of the knobs.
func (f Faults) Validate() error {
	var errs []error
	if f.PRefuse < 0 || f.PRefuse > 1 {
		errs = append(errs, errors.New("p-refuse must be within [0,1]"))
	}
	if f.PAmbiguous < 0 || f.PAmbiguous > 1 {
		errs = append(errs, errors.New("p-ambiguous must be within [0,1]"))
	}
	if f.PH2Reset < 0 || f.PH2Reset > 1 {
		errs = append(errs, errors.New("p-h2-reset must be within [0,1]"))
	}
	if f.Latency < 0 || f.LatencyJitter < 0 || f.StatusLag < 0 || f.HangFor < 0 || f.Outage.From < 0 || f.Outage.For < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	return errors.Join(errs...)
}

// Config configures a Server.
type Config struct {
	Token string // accepted bearer token; default DefaultToken
	Seed  int64  // seed of all randomness; 0 picks one (logged and shown in Stats)
	// TLSCertFile and TLSKeyFile make Serve speak TLS (1.2 at least) with
	// this PEM certificate and key, HTTP/2 or HTTP/1.1 as the client
	// chooses by ALPN. Both or neither.
	TLSCertFile string
	TLSKeyFile  string
	// TLSGenerate makes Serve first write a new self-signed certificate
	// and key to TLSCertFile and TLSKeyFile (see WriteSelfSigned); a
	// client trusts it with TLSCertFile as CA file.
	TLSGenerate bool
	// NumericOrderIDs makes withdrawal order ids 16-digit numbers that
	// pass the Luhn check, as some PSPs number their orders: they read
	// like card numbers, and must still be used exactly as given.
	NumericOrderIDs bool
	Faults

	// Lifecycle of a withdrawal order (see the package documentation).
	// SettleAfter zero keeps every order "Created" forever.
	SettleAfter  time.Duration // Created -> Processing at SettleAfter/2 -> final at SettleAfter
	PFail        float64       // share of orders, drawn at creation, that end failed with a reason
	PaidStatus   string        // final word of a paid order; "" means DefaultPaidStatus
	FailedStatus string        // final word of a failed order; "" means DefaultFailedStatus
	// Returns after paid: a share PReturn of the paid orders, drawn at
	// creation, report ReturnedStatus (with a reason and returnedAt)
	// ReturnAfter after they were paid, and a callback announces it.
	PReturn        float64
	ReturnAfter    time.Duration
	ReturnedStatus string // "" means DefaultReturnedStatus

	// Callbacks: with CallbackURL set, every status change of a withdrawal
	// order (Processing, final) is POSTed there with the header
	// "X-Callback-Secret: CallbackSecret".
	CallbackURL    string
	CallbackSecret string        // never logged
	PCallbackDup   float64       // probability of sending a callback twice
	CallbackDelay  time.Duration // each delivery waits a random 0..CallbackDelay (so they may arrive reordered)
	// CallbackRetries is how many times a failed delivery is retried
	// (0: DefaultCallbackRetries; negative: none), waiting CallbackBackoff
	// (0: DefaultCallbackBackoff) then twice as long each time.
	CallbackRetries int
	CallbackBackoff time.Duration
	// CallbackConcurrency bounds the deliveries in progress (0:
	// DefaultCallbackConcurrency).
	CallbackConcurrency int

	// Clock is the simulator's clock for order times, the lifecycle, the
	// status lag and the outage window; nil means the system clock. Waits
	// (latency, hang, callback delay ticks, retry backoff) use real time.
	Clock Clock
}

// Clock tells the time (an interface, so that Config stays comparable).
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Defaults of the lifecycle and the callbacks.
const (
	DefaultPaidStatus          = "Paid"
	DefaultFailedStatus        = "Failed"
	DefaultReturnedStatus      = "Returned"
	StatusCreated              = "Created"
	StatusProcessing           = "Processing"
	DefaultCallbackRetries     = 3
	DefaultCallbackBackoff     = 200 * time.Millisecond
	DefaultCallbackConcurrency = 16
	// CallbackSecretHeader carries Config.CallbackSecret on every callback.
	CallbackSecretHeader = "X-Callback-Secret"
)

// DefaultConfig is the configuration without faults.
func DefaultConfig() Config {
	return Config{Token: DefaultToken, Faults: Faults{HangFor: DefaultHangFor},
		PaidStatus: DefaultPaidStatus, FailedStatus: DefaultFailedStatus}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Token) == "" {
		return errors.New("token must not be empty")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errTLSHalf
	}
	if c.TLSGenerate && c.TLSCertFile == "" {
		return errors.New("--tls-generate needs --tls-cert and --tls-key: the files to write")
	}
	return errors.Join(c.Faults.Validate(), c.validateLifecycle())
}

func (c Config) validateLifecycle() error {
	var errs []error
	if c.SettleAfter < 0 || c.CallbackDelay < 0 || c.CallbackBackoff < 0 {
		errs = append(errs, errors.New("settle-after and callback-delay must not be negative"))
	}
	if c.PFail < 0 || c.PFail > 1 {
		errs = append(errs, errors.New("p-fail must be within [0,1]"))
	}
	if c.PCallbackDup < 0 || c.PCallbackDup > 1 {
		errs = append(errs, errors.New("p-callback-dup must be within [0,1]"))
	}
	paid, failed := orDefault(strings.TrimSpace(c.PaidStatus), DefaultPaidStatus), orDefault(strings.TrimSpace(c.FailedStatus), DefaultFailedStatus)
	switch {
	case paid == failed:
		errs = append(errs, fmt.Errorf("paid-status and failed-status must differ (both %q)", paid))
	case paid == StatusCreated || paid == StatusProcessing || failed == StatusCreated || failed == StatusProcessing:
		errs = append(errs, fmt.Errorf("paid-status and failed-status must not be %q or %q", StatusCreated, StatusProcessing))
	}
	if c.PReturn < 0 || c.PReturn > 1 || c.ReturnAfter < 0 {
		errs = append(errs, errors.New("p-return must be within [0,1] and return-after not negative"))
	}
	if c.PReturn > 0 && (c.SettleAfter == 0 || c.ReturnAfter == 0) {
		errs = append(errs, errors.New("p-return needs settle-after and return-after: a return follows a paid order"))
	}
	if r := strings.TrimSpace(c.ReturnedStatus); r != "" && (r == paid || r == failed || r == StatusCreated || r == StatusProcessing) {
		errs = append(errs, fmt.Errorf("returned-status %q must differ from the other status words", r))
	}
	if c.SettleAfter == 0 && c.PFail > 0 {
		errs = append(errs, errors.New("p-fail needs settle-after: without it orders stay Created"))
	}
	if c.CallbackURL != "" {
		u, err := url.Parse(c.CallbackURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, errors.New("callback-url must be an absolute http or https URL"))
		case strings.TrimSpace(c.CallbackSecret) == "":
			errs = append(errs, errors.New("callback-url needs callback-secret"))
		case c.SettleAfter == 0:
			errs = append(errs, errors.New("callback-url needs settle-after: without it no order changes status"))
		}
	} else if c.PCallbackDup > 0 || c.CallbackDelay > 0 {
		errs = append(errs, errors.New("p-callback-dup and callback-delay need callback-url"))
	}
	return errors.Join(errs...)
}

// RegisterFlags registers the simulator's flags on fs and returns the
// Config they fill when fs is parsed. The listen address is the caller's.
func RegisterFlags(fs *flag.FlagSet) *Config {
	c := DefaultConfig()
	cfg := &c
	fs.StringVar(&cfg.Token, "token", cfg.Token, "bearer token the simulator accepts")
	fs.BoolVar(&cfg.Forbid, "forbid", false, "answer 403 to every authenticated request")
	fs.Var((*amountFlag)(&cfg.MaxAmount), "reject-above", "answer 422 to a withdrawal with an amount above this (empty: no limit)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "latency added to every PSP answer")
	fs.DurationVar(&cfg.LatencyJitter, "latency-jitter", 0, "random extra latency, uniform in [0, jitter]")
	fs.Var((*probFlag)(&cfg.PRefuse), "p-refuse", "probability of answering 423 before storing anything (0..1)")
	fs.Var((*probFlag)(&cfg.PAmbiguous), "p-ambiguous", "probability of storing the order, then answering 500/502/503/423/hang/drop (0..1)")
	fs.Var((*probFlag)(&cfg.PH2Reset), "p-h2-reset", "probability of storing a create, then resetting its HTTP/2 stream with PROTOCOL_ERROR instead of answering (0..1; needs --tls-cert; over HTTP/1.1 the connection is dropped)")
	fs.DurationVar(&cfg.StatusLag, "status-lag", 0, "a new order answers 404 to status queries for this long")
	fs.Var((*windowFlag)(&cfg.Outage), "outage", "FROM:FOR relative to start (e.g. 10s:30s): every PSP request answers 503 in that window")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of all randomness (0: pick one and log it)")
	fs.DurationVar(&cfg.HangFor, "hang-for", cfg.HangFor, "how long a hang lasts, unless the client goes away first")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate (with --tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM key of --tls-cert")
	fs.DurationVar(&cfg.SettleAfter, "settle-after", 0, "a withdrawal order turns Processing after half this, then paid or failed after this (0: orders stay Created)")
	fs.Var((*probFlag)(&cfg.PFail), "p-fail", "share of orders, drawn at creation, that end failed with a reason (0..1; needs --settle-after)")
	fs.StringVar(&cfg.PaidStatus, "paid-status", cfg.PaidStatus, "status word of a paid order")
	fs.StringVar(&cfg.FailedStatus, "failed-status", cfg.FailedStatus, "status word of a failed order")
	fs.Var((*probFlag)(&cfg.PReturn), "p-return", "share of paid orders, drawn at creation, whose money comes back later: their status turns --returned-status after --return-after (0..1)")
	fs.DurationVar(&cfg.ReturnAfter, "return-after", 0, "how long after it was paid a returned order reports its return (with a callback)")
	fs.StringVar(&cfg.ReturnedStatus, "returned-status", DefaultReturnedStatus, "status word of an order whose money came back")
	fs.StringVar(&cfg.CallbackURL, "callback-url", "", "POST every status change of a withdrawal order to this URL (needs --settle-after and --callback-secret)")
	fs.StringVar(&cfg.CallbackSecret, "callback-secret", "", "secret sent in the X-Callback-Secret header of every callback (prefer the environment variable)")
	fs.Var((*probFlag)(&cfg.PCallbackDup), "p-callback-dup", "probability of sending a callback twice (0..1)")
	fs.DurationVar(&cfg.CallbackDelay, "callback-delay", 0, "delay each callback by a random 0..this, so callbacks may arrive reordered")
	fs.BoolVar(&cfg.TLSGenerate, "tls-generate", false, "first write a new self-signed certificate and key to --tls-cert and --tls-key; clients trust --tls-cert as CA (payout --psp-ca-file)")
	return cfg
}

type amountFlag money.Amount

func (a *amountFlag) String() string {
	if a == nil || money.Amount(*a).IsZero() {
		return ""
	}
	return money.Amount(*a).String()
}

func (a *amountFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		*a = amountFlag(money.Amount{})
		return nil
	}
	v, err := money.Parse(s, 2)
	if err != nil {
		return err
	}
	*a = amountFlag(v)
	return nil
}

type probFlag float64

func (p *probFlag) String() string {
	if p == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*p), 'g', -1, 64)
}

func (p *probFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || v > 1 {
		return fmt.Errorf("probability %q: want a number within [0,1]", s)
	}
	*p = probFlag(v)
	return nil
}

type windowFlag Window

func (w *windowFlag) String() string {
	if w == nil {
		return ""
	}
	return Window(*w).String()
}

func (w *windowFlag) Set(s string) error {
	v, err := ParseWindow(s)
	if err != nil {
		return err
	}
	*w = windowFlag(v)
	return nil
}
