package psp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testlog"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/rs/zerolog"
)

const (
	testToken = "tok-SECRET-123"
	testCard  = "4111111111111111"
)

// startSandbox serves a simulator over real loopback TCP.
func startSandbox(t testing.TB, mutate func(*sandbox.Config)) (*sandbox.Server, *httptest.Server) {
	t.Helper()
	cfg := sandbox.DefaultConfig()
	cfg.Token = testToken
	cfg.Seed = 7
	if mutate != nil {
		mutate(&cfg)
	}
	sb := sandbox.New(cfg, zerolog.Nop())
	ts := httptest.NewServer(sb.Handler())
	t.Cleanup(ts.Close)
	return sb, ts
}

func newClient(t testing.TB, base string, mutate func(*psp.Config)) *psp.Client {
	t.Helper()
	cfg := psp.Config{BaseURL: base, Token: psp.StaticToken(testToken), Timeout: 2 * time.Second, Logger: zerolog.Nop()}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := psp.New(cfg)
	if err != nil {
		t.Fatalf("psp.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// mustCreate sends w and fails the test unless the PSP created it.
func mustCreate(ctx context.Context, t testing.TB, c *psp.Client, w psp.WithdrawalRequest) psp.Result {
	t.Helper()
	r := c.CreateWithdrawal(ctx, w)
	if r.Outcome != psp.Created {
		t.Fatalf("create: %v %s", r.Outcome, r.Message)
	}
	return r
}

func withdrawal(ext, amount, cardNo string) psp.WithdrawalRequest {
	return psp.WithdrawalRequest{
		ExternalID: ext,
		Amount:     money.MustParse(amount),
		Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: cardNo}},
	}
}

func force(t testing.TB, sb *sandbox.Server, f sandbox.Force) {
	t.Helper()
	if err := sb.Force(f); err != nil {
		t.Fatalf("force: %v", err)
	}
}

// TestCreateOutcomes covers every row of the create outcome table of
// docs/design.md against the real simulator.
func TestCreateOutcomes(t *testing.T) {
	type row struct {
		name       string
		setup      func(t *testing.T, sb *sandbox.Server)
		base       func(ts *httptest.Server) string // default ts.URL
		token      string
		timeout    time.Duration
		req        psp.WithdrawalRequest
		outcome    psp.Outcome
		status     int
		sent       bool
		stored     int // orders the simulator holds afterwards
		retryAfter time.Duration
		msg        string // substring of Message
	}
	ok := withdrawal("EXT-1", "10.50", testCard)
	rows := []row{
		{name: "200 created", req: ok, outcome: psp.Created, status: 200, sent: true, stored: 1},
		{name: "400 invalid amount", req: withdrawal("EXT-1", sandbox.RefusedAmount, testCard), outcome: psp.Rejected, status: 400, sent: true, msg: "13.13"},
		{name: "422 declined card", req: withdrawal("EXT-1", "10.50", sandbox.DeclinedCard), outcome: psp.Rejected, status: 422, sent: true, msg: "400000******0002"},
		{name: "422 over the limit", setup: func(t *testing.T, sb *sandbox.Server) {
			f := sb.Faults()
			f.MaxAmount = money.MustParse("5")
			if err := sb.SetFaults(f); err != nil {
				t.Fatal(err)
			}
		}, req: ok, outcome: psp.Rejected, status: 422, sent: true, msg: "limit"},
		{name: "401 wrong token", token: "tok-WRONG-456", req: ok, outcome: psp.AuthFault, status: 401, sent: true},
		{name: "403 forbidden", setup: func(t *testing.T, sb *sandbox.Server) {
			f := sb.Faults()
			f.Forbid = true
			if err := sb.SetFaults(f); err != nil {
				t.Fatal(err)
			}
		}, req: ok, outcome: psp.AuthFault, status: 403, sent: true},
		{name: "404 wrong base path", base: func(ts *httptest.Server) string { return ts.URL + "/psp" }, req: ok, outcome: psp.AuthFault, status: 404, sent: true, msg: "base URL"},
		{name: "405 wrong base path", base: func(ts *httptest.Server) string { return ts.URL + psp.PathWithdrawalCreate }, req: ok, outcome: psp.AuthFault, status: 405, sent: true},
		{name: "429 with Retry-After", setup: forced(sandbox.Force{Status: 429, RetryAfter: "2"}), req: ok, outcome: psp.RetryLater, status: 429, sent: true, retryAfter: 2 * time.Second},
		{name: "423 locked", setup: forced(sandbox.Force{Status: 423}), req: ok, outcome: psp.Ambiguous, status: 423, sent: true},
		{name: "500 after storing", setup: forced(sandbox.Force{Status: 500, Store: true}), req: ok, outcome: psp.Ambiguous, status: 500, sent: true, stored: 1},
		{name: "502", setup: forced(sandbox.Force{Status: 502}), req: ok, outcome: psp.Ambiguous, status: 502, sent: true},
		{name: "503 after storing", setup: forced(sandbox.Force{Status: 503, Store: true}), req: ok, outcome: psp.Ambiguous, status: 503, sent: true, stored: 1},
		{name: "unexpected 409", setup: forced(sandbox.Force{Status: 409}), req: ok, outcome: psp.Ambiguous, status: 409, sent: true},
		{name: "hang past the timeout", setup: forced(sandbox.Force{Fault: sandbox.FaultHang, Store: true}), timeout: 300 * time.Millisecond, req: ok, outcome: psp.Ambiguous, status: 0, sent: true, stored: 1, msg: "timeout"},
		{name: "dropped connection", setup: forced(sandbox.Force{Fault: sandbox.FaultDrop, Store: true}), req: ok, outcome: psp.Ambiguous, status: 0, sent: true, stored: 1},
		{name: "unparsable 200", setup: forced(sandbox.Force{Fault: sandbox.FaultGarbage200, Store: true}), req: ok, outcome: psp.Ambiguous, status: 200, sent: true, stored: 1, msg: "unparsable"},
		{name: "dial error", base: func(*httptest.Server) string { return "http://" + testenv.ClosedAddr(t) }, req: ok, outcome: psp.RetryLater, status: 0, sent: false, msg: "not sent"},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			sb, ts := startSandbox(t, nil)
			if tc.setup != nil {
				tc.setup(t, sb)
			}
			base := ts.URL
			if tc.base != nil {
				base = tc.base(ts)
			}
			c := newClient(t, base, func(c *psp.Config) {
				if tc.token != "" {
					c.Token = psp.StaticToken(tc.token)
				}
				if tc.timeout > 0 {
					c.Timeout = tc.timeout
				}
			})
			res := c.CreateWithdrawal(context.Background(), tc.req)
			if res.Outcome != tc.outcome || res.HTTPStatus != tc.status || res.Sent != tc.sent {
				t.Fatalf("got outcome=%v status=%d sent=%v (%q), want %v %d %v", res.Outcome, res.HTTPStatus, res.Sent, res.Message, tc.outcome, tc.status, tc.sent)
			}
			if res.Op != psp.OpWithdrawalCreate {
				t.Errorf("op = %q", res.Op)
			}
			if tc.retryAfter != res.RetryAfter {
				t.Errorf("RetryAfter = %v, want %v", res.RetryAfter, tc.retryAfter)
			}
			if !strings.Contains(res.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", res.Message, tc.msg)
			}
			if tc.outcome == psp.Created {
				if !strings.HasPrefix(res.Order.OrderID, "WD-") || res.Order.ExternalID != "EXT-1" || res.Order.Amount != "10.50" || res.Order.Status != "Created" {
					t.Errorf("order = %+v", res.Order)
				}
			} else if res.Order != (psp.Order{}) {
				t.Errorf("order filled on %v: %+v", res.Outcome, res.Order)
			}
			if res.Duration <= 0 {
				t.Errorf("duration not measured")
			}
			if got := len(sb.Orders()); got != tc.stored {
				t.Errorf("simulator holds %d orders, want %d", got, tc.stored)
			}
		})
	}
}

func forced(f sandbox.Force) func(*testing.T, *sandbox.Server) {
	return func(t *testing.T, sb *sandbox.Server) { force(t, sb, f) }
}

func TestStatusOutcomes(t *testing.T) {
	sb, ts := startSandbox(t, nil)
	c := newClient(t, ts.URL, nil)
	ctx := context.Background()
	created := mustCreate(ctx, t, c, withdrawal("ext/with/slash?#", "7", testCard))

	check := func(name string, res psp.Result, outcome psp.Outcome, status int) {
		t.Helper()
		if res.Outcome != outcome || res.HTTPStatus != status || res.Op != psp.OpWithdrawalStatus {
			t.Errorf("%s: got %v %d %q, want %v %d", name, res.Outcome, res.HTTPStatus, res.Message, outcome, status)
		}
	}
	byID := c.WithdrawalStatus(ctx, created.Order.OrderID)
	check("by order id", byID, psp.Created, 200)
	if byID.Order != created.Order {
		t.Errorf("status order %+v, create order %+v", byID.Order, created.Order)
	}
	byExt := c.WithdrawalStatus(ctx, "ext/with/slash?#")
	check("by externalId (path-escaped)", byExt, psp.Created, 200)
	if byExt.Order.OrderID != created.Order.OrderID {
		t.Errorf("by externalId found %q", byExt.Order.OrderID)
	}
	mine := psp.Expect{ExternalID: "ext/with/slash?#", OrderID: created.Order.OrderID}
	if r := c.CheckWithdrawal(ctx, mine); r.ByExternalID {
		t.Error("CheckWithdrawal queried by externalId although the order id is known")
	} else {
		check("CheckWithdrawal prefers the order id", r, psp.Created, 200)
	}
	byExtCfg := newClient(t, ts.URL, func(c *psp.Config) { c.StatusIDByExternalID = true })
	other := psp.Expect{ExternalID: "no-such-ext", OrderID: created.Order.OrderID}
	if r := byExtCfg.CheckWithdrawal(ctx, other); !r.ByExternalID {
		t.Error("CheckWithdrawal with StatusIDByExternalID queried by the order id")
	} else {
		check("CheckWithdrawal by externalId when configured", r, psp.NotFound, 404)
	}

	check("unknown", c.WithdrawalStatus(ctx, "WD-unknown"), psp.NotFound, 404)
	wrong := newClient(t, ts.URL, func(c *psp.Config) { c.Token = psp.StaticToken("nope-nope") })
	check("401", wrong.WithdrawalStatus(ctx, created.Order.OrderID), psp.AuthFault, 401)

	status := sandbox.OpWithdrawalStatus
	for _, f := range []struct {
		force   sandbox.Force
		outcome psp.Outcome
		code    int
	}{
		{sandbox.Force{Status: 403, Op: status}, psp.AuthFault, 403},
		{sandbox.Force{Status: 429, RetryAfter: "3", Op: status}, psp.RetryLater, 429},
		{sandbox.Force{Status: 500, Op: status}, psp.Ambiguous, 500},
		{sandbox.Force{Status: 423, Op: status}, psp.Ambiguous, 423},
		{sandbox.Force{Status: 405, Op: status}, psp.Ambiguous, 405},
		{sandbox.Force{Fault: sandbox.FaultGarbage200, Op: status}, psp.Ambiguous, 200},
		{sandbox.Force{Fault: sandbox.FaultDrop, Op: status}, psp.Ambiguous, 0},
	} {
		force(t, sb, f.force)
		q := c
		if f.force.Fault == sandbox.FaultDrop {
			// Go's transport replays an idempotent GET once when a
			// reused connection fails (harmless for a read); a fresh
			// client has no connection to reuse, so the drop shows.
			q = newClient(t, ts.URL, nil)
		}
		res := q.WithdrawalStatus(ctx, created.Order.OrderID)
		check("forced "+f.force.Fault+http.StatusText(f.force.Status), res, f.outcome, f.code)
		if f.code == 429 && res.RetryAfter != 3*time.Second {
			t.Errorf("429: RetryAfter %v", res.RetryAfter)
		}
	}
	dead := newClient(t, "http://"+testenv.ClosedAddr(t), nil)
	res := dead.WithdrawalStatus(ctx, "x")
	check("dial error", res, psp.RetryLater, 0)
	if res.Sent {
		t.Errorf("dial error: Sent = true")
	}
}

func TestCreateDeposit(t *testing.T) {
	sb, ts := startSandbox(t, nil)
	c := newClient(t, ts.URL, nil)
	ctx := context.Background()
	req := psp.DepositRequest{
		ExternalTransactionID: "DEP-1",
		Amount:                money.MustParse("25.00"),
		Currency:              "EUR",
		CallbackURL:           "https://merchant.example/cb",
		SuccessRedirectURL:    "https://merchant.example/ok",
		AdditionalFields: []psp.Property{
			{Key: "type", Value: "card"},
			{Key: "cardNumber", Value: testCard},
			{Key: "cardCvv", Value: "123"},
		},
	}
	dep, res := c.CreateDeposit(ctx, req)
	if res.Outcome != psp.Created || res.Op != psp.OpDepositCreate {
		t.Fatalf("deposit: %v %d %s", res.Outcome, res.HTTPStatus, res.Message)
	}
	if dep.ExternalID != "DEP-1" || dep.OrderStatus != "Processing" || dep.Amount != "25.00" || !strings.HasPrefix(dep.FormURL, ts.URL+"/sandbox/pay/DP-") {
		t.Errorf("deposit result %+v", dep)
	}
	form, err := http.Get(dep.FormURL)
	if err != nil || form.StatusCode != 200 {
		t.Fatalf("form: %v %v", err, form)
	}
	_ = form.Body.Close()

	req.Amount = money.MustParse(sandbox.RefusedAmount)
	if dep, res := c.CreateDeposit(ctx, req); res.Outcome != psp.Rejected || res.HTTPStatus != 400 || dep != (psp.DepositResult{}) {
		t.Errorf("refused amount: %v %d %+v", res.Outcome, res.HTTPStatus, dep)
	}
	req.Amount = money.MustParse("1")
	force(t, sb, sandbox.Force{Status: 500, Store: true, Op: sandbox.OpDepositCreate})
	if _, res := c.CreateDeposit(ctx, req); res.Outcome != psp.Ambiguous || res.HTTPStatus != 500 {
		t.Errorf("forced 500: %v %d", res.Outcome, res.HTTPStatus)
	}
	if st := sb.Stats(); st.DepositsStored != 2 || st.DepositsReceived != 3 {
		t.Errorf("stats: %+v", st)
	}
	for _, o := range sb.Orders() {
		for _, p := range o.Properties {
			if p.Key == "cardCvv" || p.Value == testCard {
				t.Errorf("order keeps secret %s", p.Key)
			}
		}
	}
}

// TestAmountWire checks the exact JSON of the amount in both modes. It
// records what a real server received over loopback.
func TestAmountWire(t *testing.T) {
	got := make(chan []byte, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(401)
			return
		}
		// Echo the amount as a JSON number with two decimals at least:
		// the client compares it numerically with what it sent.
		var in struct{ Amount json.Number }
		_ = json.Unmarshal(b, &in)
		amt := in.Amount.String()
		if !strings.Contains(amt, ".") {
			amt += ".00"
		}
		_, _ = io.WriteString(w, `{"pspDepositOrderID":"WD-1","externalId":"E","status":"Created","amount":`+amt+`}`)
	}))
	defer ts.Close()
	for _, tc := range []struct {
		asNumber bool
		amount   string
		want     string
	}{
		{false, "10.50", `{"externalId":"E","amount":"10.50","properties":[{"key":"cardNumber","value":"4111111111111111"}]}`},
		{true, "10.50", `{"externalId":"E","amount":10.50,"properties":[{"key":"cardNumber","value":"4111111111111111"}]}`},
		{true, "123456789012345.99", `{"externalId":"E","amount":123456789012345.99,"properties":[{"key":"cardNumber","value":"4111111111111111"}]}`},
		{false, "7", `{"externalId":"E","amount":"7","properties":[{"key":"cardNumber","value":"4111111111111111"}]}`},
	} {
		c := newClient(t, ts.URL, func(c *psp.Config) { c.AmountAsNumber = tc.asNumber })
		res := c.CreateWithdrawal(context.Background(), withdrawal("E", tc.amount, testCard))
		if b := <-got; string(b) != tc.want {
			t.Errorf("asNumber=%v: sent %s, want %s", tc.asNumber, b, tc.want)
		}
		if want := money.MustParse(tc.amount); res.Outcome != psp.Created || money.MustParse(res.Order.Amount).Cmp(want) != 0 {
			t.Errorf("result %v %+v", res.Outcome, res.Order)
		}
	}
}

// TestAmountAsNumberAccepted: the simulator takes both forms and keeps the
// exact text.
func TestAmountAsNumberAccepted(t *testing.T) {
	sb, ts := startSandbox(t, nil)
	for _, asNumber := range []bool{false, true} {
		c := newClient(t, ts.URL, func(c *psp.Config) { c.AmountAsNumber = asNumber })
		if res := c.CreateWithdrawal(context.Background(), withdrawal("E", "0.10", testCard)); res.Outcome != psp.Created || res.Order.Amount != "0.10" {
			t.Errorf("asNumber=%v: %v %+v %s", asNumber, res.Outcome, res.Order, res.Message)
		}
	}
	if n := len(sb.Orders()); n != 2 {
		t.Errorf("%d orders", n)
	}
}

func TestRefusedBeforeSending(t *testing.T) {
	sb, ts := startSandbox(t, nil)
	c := newClient(t, ts.URL, nil)
	ctx := context.Background()
	for name, req := range map[string]psp.WithdrawalRequest{
		"no externalId": {Amount: money.MustParse("1"), Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: testCard}}},
		"zero amount":   {ExternalID: "E", Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: testCard}}},
		"no properties": {ExternalID: "E", Amount: money.MustParse("1")},
	} {
		if res := c.CreateWithdrawal(ctx, req); res.Outcome != psp.Rejected || res.Sent || res.HTTPStatus != 0 {
			t.Errorf("%s: %+v", name, res)
		}
	}
	if res := c.WithdrawalStatus(ctx, ""); res.Outcome != psp.Rejected || res.Sent {
		t.Errorf("empty status id: %+v", res)
	}
	if st := sb.Stats(); st.CreatesReceived != 0 || st.StatusQueries != 0 {
		t.Errorf("requests reached the simulator: %+v", st)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []psp.Config{
		{},
		{BaseURL: "ftp://x", Token: psp.StaticToken("t")},
		{BaseURL: "http://user:" + testToken + "@host", Token: psp.StaticToken("t")},
		{BaseURL: "http://host?x=1", Token: psp.StaticToken("t")},
		{BaseURL: "http://host"},
	} {
		_, err := psp.New(cfg)
		if !errors.Is(err, psp.ErrConfig) {
			t.Errorf("%q: err = %v", cfg.BaseURL, err)
		}
		if err != nil && strings.Contains(err.Error(), testToken) {
			t.Errorf("error leaks the token: %v", err)
		}
	}
}

func TestTokenFileRotation(t *testing.T) {
	_, ts := startSandbox(t, func(c *sandbox.Config) { c.Token = "second-token" })
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("first-token\n", t0)
	src := psp.TokenFile(path)
	c := newClient(t, ts.URL, func(c *psp.Config) { c.Token = src })
	ctx := context.Background()
	if res := c.CreateWithdrawal(ctx, withdrawal("E", "1", testCard)); res.Outcome != psp.AuthFault || res.HTTPStatus != 401 {
		t.Fatalf("old token: %v %d", res.Outcome, res.HTTPStatus)
	}
	write("  second-token \n", t0.Add(time.Second)) // rotated, same size as before
	if res := c.CreateWithdrawal(ctx, withdrawal("E", "1", testCard)); res.Outcome != psp.Created {
		t.Fatalf("rotated token: %v %d %s", res.Outcome, res.HTTPStatus, res.Message)
	}

	write(" \n", t0.Add(2*time.Second))
	_, err := src.Token()
	if !errors.Is(err, psp.ErrToken) {
		t.Fatalf("empty file: err = %v", err)
	}
	res := c.CreateWithdrawal(ctx, withdrawal("E", "1", testCard))
	if res.Outcome != psp.AuthFault || res.Sent {
		t.Errorf("no token: %+v", res)
	}

	if _, err := psp.TokenFile(filepath.Join(t.TempDir(), "missing")).Token(); !errors.Is(err, psp.ErrToken) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	write("tok with space", t0.Add(3*time.Second))
	if _, err := src.Token(); !errors.Is(err, psp.ErrToken) || strings.Contains(err.Error(), "with space") {
		t.Errorf("malformed token: %v", err)
	}
	if _, err := psp.StaticToken("  ").Token(); !errors.Is(err, psp.ErrToken) {
		t.Errorf("static empty: %v", err)
	}
}

// TestObserve: the hook sees every Result.
func TestObserve(t *testing.T) {
	_, ts := startSandbox(t, nil)
	var seen []psp.Outcome
	c := newClient(t, ts.URL, func(c *psp.Config) { c.Observe = func(r psp.Result) { seen = append(seen, r.Outcome) } })
	ctx := context.Background()
	c.CreateWithdrawal(ctx, withdrawal("E", "1", testCard))
	c.WithdrawalStatus(ctx, "nope")
	c.CreateWithdrawal(ctx, psp.WithdrawalRequest{})
	want := []psp.Outcome{psp.Created, psp.NotFound, psp.Rejected}
	if len(seen) != len(want) {
		t.Fatalf("seen %v", seen)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("seen %v, want %v", seen, want)
		}
	}
}

// TestNoSecretsInLogsOrResults runs creates that fail in many ways, against
// the simulator and against a hostile server that echoes the card number
// and the token in its answers, and checks that neither the token nor the
// full card number appears in the logs or the Results.
func TestNoSecretsInLogsOrResults(t *testing.T) {
	var clientLog, sandboxLog syncBuffer
	cfg := sandbox.DefaultConfig()
	cfg.Token = testToken
	cfg.Seed = 3
	sb := sandbox.New(cfg, zerolog.New(&sandboxLog))
	ts := httptest.NewServer(sb.Handler())
	defer ts.Close()

	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		w.WriteHeader(422)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "bad request " + string(body) + " auth " + auth})
	}))
	defer echo.Close()
	echo200 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"pspDepositOrderID":"WD-1","externalId":"E-echo200","status":"declined 4111 1111 1111 1111 `+testToken+`","amount":"`+testToken+`"}`)
	}))
	defer echo200.Close()
	echo500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, "<html>card=4111-1111-1111-1111 "+r.Header.Get("Authorization")+"</html>")
	}))
	defer echo500.Close()

	logger := zerolog.New(&clientLog).Level(zerolog.DebugLevel)
	var results []psp.Result
	mk := func(base string, timeout time.Duration) *psp.Client {
		return newClient(t, base, func(c *psp.Config) {
			c.Logger = logger
			c.Timeout = timeout
			c.Observe = func(r psp.Result) { results = append(results, r) }
		})
	}
	ctx := context.Background()
	c := mk(ts.URL, 300*time.Millisecond)
	for _, f := range []sandbox.Force{
		{Status: 500, Store: true}, {Status: 429, RetryAfter: "1"}, {Status: 423},
		{Fault: sandbox.FaultHang}, {Fault: sandbox.FaultDrop}, {Fault: sandbox.FaultGarbage200},
	} {
		force(t, sb, f)
		c.CreateWithdrawal(ctx, withdrawal("E-forced", "10.00", testCard))
	}
	c.CreateWithdrawal(ctx, withdrawal("E-luhn", "10.00", "4111111111111112"))
	c.CreateWithdrawal(ctx, withdrawal("E-declined", "10.00", sandbox.DeclinedCard))
	c.CreateWithdrawal(ctx, withdrawal("E-ok", "10.00", testCard))
	c.WithdrawalStatus(ctx, testCard)
	mk(ts.URL+"/wrong", time.Second).CreateWithdrawal(ctx, withdrawal("E", "1", testCard))
	mk(echo.URL, time.Second).CreateWithdrawal(ctx, withdrawal("E-echo", "1", testCard))
	mk(echo200.URL, time.Second).CreateWithdrawal(ctx, withdrawal("E-echo200", "1", testCard))
	mk(echo500.URL, time.Second).CreateWithdrawal(ctx, withdrawal("E-echo500", "1", testCard))
	mk("http://"+testenv.ClosedAddr(t), time.Second).CreateWithdrawal(ctx, withdrawal("E-dial", "1", testCard))
	wrongTok := newClient(t, ts.URL, func(c *psp.Config) { c.Logger = logger; c.Token = psp.StaticToken("tok-WRONG-999") })
	wrongTok.CreateWithdrawal(ctx, withdrawal("E-401", "1", testCard))

	if len(results) != 15 {
		t.Fatalf("%d results", len(results))
	}
	if !strings.Contains(clientLog.String(), `"outcome":"ambiguous"`) || !strings.Contains(clientLog.String(), `"outcome":"retry_later"`) {
		t.Fatalf("client log lacks the expected lines:\n%s", clientLog.String())
	}
	secrets := []string{testToken, testCard, "4111 1111 1111 1111", "4111-1111-1111-1111", "tok-WRONG-999"}
	check := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s leaks %q: %s", where, s, text)
			}
		}
	}
	check("client log", clientLog.String())
	check("sandbox log", sandboxLog.String())
	for _, r := range results {
		b, _ := json.Marshal(r)
		check("result", string(b))
	}
	ordersJSON, _ := json.Marshal(sb.Orders())
	check("sandbox orders", string(ordersJSON))
}

func TestConcurrentPool(t *testing.T) {
	sb, ts := startSandbox(t, func(c *sandbox.Config) { c.Latency = 20 * time.Millisecond })
	c := newClient(t, ts.URL, func(c *psp.Config) { c.MaxConnsPerHost = 4 })
	errs := make(chan psp.Result, 16)
	for i := 0; i < 16; i++ {
		go func() {
			errs <- c.CreateWithdrawal(context.Background(), withdrawal("E", "1", testCard))
		}()
	}
	for i := 0; i < 16; i++ {
		if r := <-errs; r.Outcome != psp.Created {
			t.Errorf("%v %s", r.Outcome, r.Message)
		}
	}
	if st := sb.Stats(); st.OrdersStored != 16 || st.CreatesByExternalID["E"] != 16 {
		t.Errorf("stats %+v", st)
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

// TestRecheckReadsTheTokenAfresh: RecheckAPI reads a token file again
// even when it looks unchanged (same size and modification time), where
// CheckAPI keeps the token it read.
func TestRecheckReadsTheTokenAfresh(t *testing.T) {
	_, ts := startSandbox(t, func(c *sandbox.Config) { c.Token = "token-two" })
	path := filepath.Join(t.TempDir(), "token")
	mtime := time.Now().Add(-time.Hour)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("token-one")
	c := newClient(t, ts.URL, func(c *psp.Config) { c.Token = psp.TokenFile(path) })
	ctx := context.Background()
	if v := c.CheckAPI(ctx).Verdict; v != psp.APITokenRefused {
		t.Fatalf("old token: verdict %v", v)
	}
	write("token-two") // same size, same time: looks unchanged
	if v := c.CheckAPI(ctx).Verdict; v != psp.APITokenRefused {
		t.Fatalf("cached token: verdict %v, want still refused", v)
	}
	if res := c.RecheckAPI(ctx); res.Verdict != psp.APIAccepted {
		t.Fatalf("recheck: verdict %v (%s), want accepted", res.Verdict, res.Message)
	}
}
