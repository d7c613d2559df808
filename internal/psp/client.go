package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/scrub"
)

// Defaults of Config.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultMaxConnsPerHost = 16
	// maxBody bounds how much of an answer is read.
	maxBody = 1 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is the scheme, host and optional path prefix of the PSP,
	// e.g. "https://psp.example.com". The API paths are appended to it.
	BaseURL string
	// Token supplies the bearer token; it is asked for on every request so
	// that a rotated token is used at once.
	Token TokenSource
	// Timeout bounds one request, from dial to the last byte of the body.
	// Default 30s.
	Timeout time.Duration
	// AmountAsNumber sends amounts as JSON numbers (10.50) instead of JSON
	// strings ("10.50"). Either way the digits are written exactly from the
	// decimal, never through float64.
	AmountAsNumber bool
	// StatusIDByExternalID makes CheckWithdrawal query by externalId
	// even when the PSP order id is known (--status-by-external-id).
	StatusIDByExternalID bool
	// MaxConnsPerHost sizes the connection pool (idle and total
	// connections to the PSP); set it to the worker concurrency. Default 16.
	MaxConnsPerHost int
	// Logger receives one debug line per request.
	Logger zerolog.Logger
	// Observe, if set, is called with every Result (for metrics).
	Observe func(Result)
	// CAFile is a PEM file of the CA certificates that sign the PSP's
	// server certificate, trusted instead of the system roots. Empty: the
	// system roots.
	CAFile string
	// ClientCertFile and ClientKeyFile are the PEM client certificate and
	// key presented when the PSP asks for one (mutual TLS). Both or
	// neither.
	//
	// The three files are read by New and read again when one of them
	// changes (modification time or size), at the next new connection, as
	// the token file is: see tlsFiles. TLS 1.2 is the minimum version,
	// always.
	ClientCertFile string
	ClientKeyFile  string
	// Transport replaces the HTTP transport (tests); nil builds one from
	// the settings above. It excludes the TLS files.
	Transport http.RoundTripper
	// Unsafe is zero in the product: only the proof of safety's broken
	// worker sets it (unsafe.go).
	Unsafe Unsafe
}

// Client is a PSP API client. It is safe for concurrent use.
type Client struct {
	baseStr string
	cfg     Config
	http    *http.Client
	log     zerolog.Logger
	lastTok atomic.Value // string: the token last used, to redact it from texts
}

// ErrConfig is matched by every configuration error of New.
var ErrConfig = errors.New("invalid psp client configuration")

// New checks cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	u, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Token == nil {
		return nil, fmt.Errorf("%w: no token source", ErrConfig)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxConnsPerHost <= 0 {
		cfg.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	files, err := openTLSFiles(cfg, u)
	if err != nil {
		return nil, err
	}
	rt := cfg.Transport
	if rt == nil {
		rt = newTransport(files, u.Hostname(), cfg.MaxConnsPerHost)
	}
	c := &Client{
		baseStr: u.String(),
		cfg:     cfg,
		log:     cfg.Logger,
		http: &http.Client{
			Transport: rt,
			// A redirect is an answer like any other: never follow it
			// (a POST would turn into a GET), classify it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	c.lastTok.Store("")
	return c, nil
}

// parseBaseURL checks and parses Config.BaseURL (its trailing slashes
// trimmed): http(s)://host[/prefix], with no credentials, query or
// fragment.
func parseBaseURL(base string) (*url.URL, error) {
	if base == "" {
		return nil, fmt.Errorf("%w: base URL is empty", ErrConfig)
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("%w: base URL does not parse", ErrConfig)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL must be http(s)://host[/prefix]", ErrConfig)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: base URL must not hold credentials, a query or a fragment", ErrConfig)
	}
	return u, nil
}

// openTLSFiles checks the TLS files of cfg, for the base URL u, and reads
// them once: nil when cfg names none.
func openTLSFiles(cfg Config, u *url.URL) (*tlsFiles, error) {
	if cfg.CAFile == "" && cfg.ClientCertFile == "" && cfg.ClientKeyFile == "" {
		return nil, nil
	}
	switch {
	case cfg.Transport != nil:
		return nil, fmt.Errorf("%w: TLS files and a Transport exclude each other", ErrConfig)
	case u.Scheme != "https":
		return nil, fmt.Errorf("%w: TLS files need an https:// base URL", ErrConfig)
	case (cfg.ClientCertFile == "") != (cfg.ClientKeyFile == ""):
		return nil, fmt.Errorf("%w: a client certificate needs its key and a key its certificate", ErrConfig)
	}
	files := &tlsFiles{ca: cfg.CAFile, cert: cfg.ClientCertFile, key: cfg.ClientKeyFile, log: cfg.Logger}
	if _, _, err := files.current(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return files, nil
}

// newTransport is the HTTP transport to the PSP at host: TLS from files
// (nil: the system roots), at most maxConns connections, kept idle up to
// 90 s.
func newTransport(files *tlsFiles, host string, maxConns int) *http.Transport {
	return &http.Transport{
		TLSClientConfig:       tlsConfig(files, host),
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxConns,
		MaxIdleConnsPerHost:   maxConns,
		MaxConnsPerHost:       maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// withdrawalWire is the body of a withdrawal create.
type withdrawalWire struct {
	ExternalID string     `json:"externalId"`
	Amount     any        `json:"amount"`
	Properties []Property `json:"properties"`
}

// amountText writes an amount with the decimals it was given ("10.50" stays
// "10.50").
func amountText(a money.Amount) string {
	d := a.Decimal()
	if e := d.Exponent(); e < 0 {
		return d.StringFixed(-e)
	}
	return d.String()
}

func (c *Client) amount(a money.Amount) any {
	if c.cfg.AmountAsNumber {
		return json.Number(amountText(a))
	}
	return amountText(a)
}

// CreateWithdrawal posts a withdrawal order. The request carries no
// idempotency header on purpose: Go's transport silently replays requests
// that have one, and the PSP does not deduplicate.
func (c *Client) CreateWithdrawal(ctx context.Context, req WithdrawalRequest) Result {
	if req.ExternalID == "" || req.Amount.IsZero() || len(req.Properties) == 0 {
		return c.invalid(OpWithdrawalCreate, req.ExternalID, "withdrawal needs an externalId, a positive amount and a destination")
	}
	body, err := json.Marshal(withdrawalWire{ExternalID: req.ExternalID, Amount: c.amount(req.Amount), Properties: req.Properties})
	if err != nil {
		return c.invalid(OpWithdrawalCreate, req.ExternalID, "encode request: "+err.Error())
	}
	// The answer must be about this order: another externalId or amount
	// makes it Ambiguous (the status path decides, nothing is re-sent).
	want := Expect{ExternalID: req.ExternalID, Amount: req.Amount}
	res, _ := c.do(ctx, OpWithdrawalCreate, req.ExternalID, http.MethodPost, PathWithdrawalCreate, body, &want)
	return res
}

// WithdrawalStatus queries the order whose PSP order id or externalId is
// id. A 200 counts as Created only when its order id or its externalId is
// id (namesAsked): the worker takes it as proof that the PSP finds orders
// by externalId.
func (c *Client) WithdrawalStatus(ctx context.Context, id string) Result {
	if id == "" {
		return c.invalid(OpWithdrawalStatus, id, "status query needs an id")
	}
	res, _ := c.do(ctx, OpWithdrawalStatus, id, http.MethodGet, statusPath(id), nil, nil)
	return namesAsked(id, answerFor(id, res))
}

// CheckWithdrawal queries the status of our order and checks the answer
// against want: by the PSP order id when want.OrderID is known and
// StatusIDByExternalID is off, else by want.ExternalID (Result.ByExternalID
// says which). A 200 counts as Created only when it carries an order id
// and its externalId, order id and amount (those it gives) are ours;
// otherwise the Outcome is Ambiguous and Result.Mismatch says what differs.
func (c *Client) CheckWithdrawal(ctx context.Context, want Expect) Result {
	id, byExt := want.OrderID, false
	if id == "" || c.cfg.StatusIDByExternalID {
		id, byExt = want.ExternalID, true
	}
	if id == "" {
		return c.invalid(OpWithdrawalStatus, id, "status query needs an id")
	}
	res, _ := c.do(ctx, OpWithdrawalStatus, id, http.MethodGet, statusPath(id), nil, &want)
	res = answerFor(id, res)
	res.ByExternalID = byExt
	return res
}

// statusPath is the path of the status query for id: the id is one path
// segment, encoded by extid.PathSegment (everything outside RFC 3986's
// unreserved set), as every id in a PSP URL.
func statusPath(id string) string { return PathWithdrawalStatus + extid.PathSegment(id) }

// DepositRequest is a deposit order to create.
type DepositRequest struct {
	ExternalTransactionID string
	Amount                money.Amount
	Currency              string
	CallbackURL           string
	ProcessingRedirectURL string
	FailedRedirectURL     string
	SuccessRedirectURL    string
	AdditionalFields      []Property
}

// DepositResult is what the PSP answered to a created deposit.
type DepositResult struct {
	ExternalID  string
	OrderStatus string
	Amount      string
	FormURL     string
}

type depositWire struct {
	Amount                any        `json:"amount"`
	Currency              string     `json:"currency"`
	ExternalTransactionID string     `json:"externalTransactionId"`
	CallbackURL           string     `json:"callbackUrl,omitempty"`
	ProcessingRedirectURL string     `json:"processingRedirectUrl,omitempty"`
	FailedRedirectURL     string     `json:"failedRedirectUrl,omitempty"`
	SuccessRedirectURL    string     `json:"successRedirectUrl,omitempty"`
	AdditionalFields      []Property `json:"additionalFields,omitempty"`
}

// CreateDeposit posts a deposit order. The DepositResult is filled when the
// Result's Outcome is Created.
func (c *Client) CreateDeposit(ctx context.Context, req DepositRequest) (DepositResult, Result) {
	if req.ExternalTransactionID == "" || req.Amount.IsZero() || req.Currency == "" {
		return DepositResult{}, c.invalid(OpDepositCreate, req.ExternalTransactionID, "deposit needs an externalTransactionId, a positive amount and a currency")
	}
	body, err := json.Marshal(depositWire{
		Amount:                c.amount(req.Amount),
		Currency:              req.Currency,
		ExternalTransactionID: req.ExternalTransactionID,
		CallbackURL:           req.CallbackURL,
		ProcessingRedirectURL: req.ProcessingRedirectURL,
		FailedRedirectURL:     req.FailedRedirectURL,
		SuccessRedirectURL:    req.SuccessRedirectURL,
		AdditionalFields:      req.AdditionalFields,
	})
	if err != nil {
		return DepositResult{}, c.invalid(OpDepositCreate, req.ExternalTransactionID, "encode request: "+err.Error())
	}
	res, dep := c.do(ctx, OpDepositCreate, req.ExternalTransactionID, http.MethodPost, PathDepositCreate, body, nil)
	if dep == nil || res.Outcome != Created {
		return DepositResult{}, res
	}
	return DepositResult{
		ExternalID:  res.Order.ExternalID,
		OrderStatus: res.Order.Status,
		Amount:      res.Order.Amount,
		FormURL:     formURL(string(dep.PaymentDetails.FormURL)),
	}, res
}

// invalid is the Result of a request refused before sending: the caller
// built it wrong, so it is Rejected and nothing was sent.
func (c *Client) invalid(op Operation, ref, msg string) Result {
	res := Result{Op: op, Outcome: Rejected, Message: finish("not sent: " + msg)}
	c.report(res, ref)
	return res
}

// do sends one request and classifies the answer, checked against want
// when it is not nil.
func (c *Client) do(ctx context.Context, op Operation, ref, method, path string, body []byte, want *Expect) (Result, *depositBody) {
	start := time.Now()
	fail := func(res Result) (Result, *depositBody) {
		res.Op, res.Message, res.Duration = op, finish(c.redact(res.Message)), time.Since(start)
		c.report(res, ref)
		return res, nil
	}
	tok, err := c.cfg.Token.Token()
	if err != nil {
		// No token: a configuration fault, nothing sent.
		return fail(Result{Outcome: AuthFault, Message: err.Error()})
	}
	c.lastTok.Store(tok)

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }})
	req, err := c.request(ctx, method, path, tok, body)
	if err != nil {
		return fail(Result{Outcome: Rejected, Message: "not sent: build request: " + transportMessage(err)})
	}
	status, header, payload, err := c.send(req)
	payload = withhold(payload, tok)
	res, dep := classify(op, status, header, payload, err, sent.Load())
	if want != nil {
		res = want.Check(res)
	}
	c.redactResult(&res, dep)
	res.Duration = time.Since(start)
	c.report(res, ref)
	return res, dep
}

// request builds a request with the bearer token. path is already escaped
// (the status id went through extid.PathSegment) and the base URL has no
// query or fragment: plain concatenation. A body is attached only after
// http.NewRequest, so that nothing ever sets GetBody (see noReplay).
func (c *Client) request(ctx context.Context, method, path, tok string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseStr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		noReplay(req, body)
		if c.cfg.Unsafe.replayableCreate { // only the proof of safety's broken worker: see unsafe.go
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	return req, nil
}

// send sends req and reads at most maxBody of the answer.
func (c *Client) send(req *http.Request) (status int, header http.Header, payload []byte, err error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	status, header = resp.StatusCode, resp.Header
	payload, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && len(payload) > maxBody {
		err = errBodyTooLarge
	}
	_ = resp.Body.Close()
	return status, header, payload, err
}

// redactResult puts the display texts of a classified answer through the
// token filter. Identifiers are kept exact (see cleanID).
func (c *Client) redactResult(res *Result, dep *depositBody) {
	res.Message = c.redact(res.Message)
	res.Order.Amount = c.redact(res.Order.Amount)
	res.Order.Status = c.redact(res.Order.Status)
	if m := res.Mismatch; m != nil {
		for _, f := range []*string{&m.ExpectedExternalID, &m.FoundExternalID, &m.ExpectedOrderID, &m.FoundOrderID, &m.ExpectedAmount, &m.FoundAmount} {
			*f = c.redact(*f)
		}
	}
	if dep != nil {
		dep.PaymentDetails.FormURL = flexString(c.redact(string(dep.PaymentDetails.FormURL)))
	}
}

var errBodyTooLarge = errors.New("answer body larger than 1 MiB")

// noReplay gives req (built without a body, so http.NewRequest set no
// GetBody: it does for a *bytes.Reader, *bytes.Buffer or *strings.Reader
// given to it) the body it sends, with no way back to its start: GetBody
// stays nil, and no Idempotency-Key or X-Idempotency-Key header is set.
// Without GetBody and those headers, no layer of Go's HTTP stack can send
// a create twice once any of it was written. From the sources of Go 1.26
// (net/http):
//
// HTTP/2 (h2_bundle.go): http2Transport.RoundTripOpt retries up to 7
// times when http2canRetryError holds: errClientConnUnusable,
// errClientConnGotGoAway (a GOAWAY whose last stream id is below ours),
// a RST_STREAM REFUSED_STREAM, or a RST_STREAM PROTOCOL_ERROR from the
// peer. http2shouldRetryRequest then replays a request with a body only
// through GetBody; without it only errClientConnUnusable is retried, and
// that error comes from awaitOpenSlotForStreamLocked, before the stream's
// headers are written. Otherwise it fails with "cannot retry err [...]
// after Request.Body was written". With GetBody set, a PROTOCOL_ERROR also
// marks the connection do-not-reuse, the pool answers ErrNoCachedConn, and
// Transport.roundTrip (transport.go) retries that on a new connection
// without limit: the same create was sent thousands of times until the
// timeout.
//
// HTTP/1.1 (transport.go): Transport.roundTrip retries only when
// persistConn.shouldRetryRequest holds: never on a fresh connection; on a
// reused one after a nothingWrittenError only if the request has no body
// or has GetBody (a create has a body and no GetBody: no retry, even then);
// after anything else only if req.isReplayable() (request.go), which for a
// POST needs GetBody or no body AND an Idempotency-Key/X-Idempotency-Key
// header. An ErrNoCachedConn retry happens before anything was written on
// a connection. http.Client itself re-sends only on redirects, which
// CheckRedirect refuses.
//
// Status queries are GETs without a body: both transports may replay them,
// which is harmless.
//
// The body is an io.NopCloser around a *bytes.Reader: net/http knows it
// does not block (transfer.go, isKnownInMemoryReader) and writes the
// headers and the body in one write, one TCP segment for a small create.
// A reader of a type of ours made it flush the headers first and copy the
// body in a second write. Whether a request may be replayed depends on
// GetBody and those headers alone (transport.go, rewindBody and
// Request.isReplayable; h2_bundle.go, http2shouldRetryRequest), never on
// the body's type.
func noReplay(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	req.Header.Del("Idempotency-Key")
	req.Header.Del("X-Idempotency-Key")
}

// redact is s, or scrub.Withheld when s holds the token (in any escaped
// form, or any scrub.SecretRun characters of it). It runs before a text is
// cut (finish(c.redact(s))), so that a cut cannot leave a piece of the
// token too short to be recognised; on texts already cut it is a last line
// of defence.
func (c *Client) redact(s string) string {
	tok, _ := c.lastTok.Load().(string)
	return scrub.WithoutSecret(s, tok)
}

// withhold is the body of an answer, or scrub.Withheld when it echoes the
// token (a wrong base URL, a gateway's error page that shows the request's
// Authorization header, JSON-, HTML- or URL-escaped): looked for in the
// whole body, before any message is taken from it and cut. Such an answer
// is not the PSP's: classified on its status alone (a 200 with this body
// is unparsable, so Ambiguous), nothing of it is kept.
func withhold(body []byte, tok string) []byte {
	if scrub.Secret(string(body), tok) {
		return []byte(scrub.Withheld)
	}
	return body
}

func (c *Client) report(res Result, ref string) {
	ev := c.log.Debug()
	if ev.Enabled() {
		key := "external_id"
		if res.Op == OpWithdrawalStatus {
			key = "status_id"
		}
		ev.Str("op", string(res.Op)).
			Str(key, finish(ref)).
			Int("http_status", res.HTTPStatus).
			Str("outcome", res.Outcome.String()).
			Bool("sent", res.Sent).
			Dur("duration", res.Duration)
		if res.Order.OrderID != "" {
			ev = ev.Str("psp_order_id", res.Order.OrderID)
		}
		if res.RetryAfter > 0 {
			ev = ev.Dur("retry_after", res.RetryAfter)
		}
		if res.Mismatch != nil {
			reasons := make([]string, len(res.Mismatch.Reasons))
			for i, r := range res.Mismatch.Reasons {
				reasons[i] = string(r)
			}
			ev = ev.Strs("mismatch", reasons)
		}
		if res.Message != "" {
			ev = ev.Str("message", res.Message)
		}
		ev.Msg("psp request")
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(res)
	}
}

// formURL keeps the payment form address when it is a plain http(s) URL.
func formURL(s string) string {
	s, ok := cleanText(s, 2048)
	if !ok {
		return ""
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return s
}
