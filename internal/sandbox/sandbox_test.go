package sandbox_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testlog"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
)

const (
	token    = "sb-SECRET-token"
	goodCard = "4111111111111111"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

func start(t testing.TB, mutate func(*sandbox.Config)) (*sandbox.Server, *httptest.Server, *syncBuffer) {
	t.Helper()
	cfg := sandbox.DefaultConfig()
	cfg.Token = token
	cfg.Seed = 1
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &syncBuffer{}
	sb := sandbox.New(cfg, zerolog.New(logs))
	ts := httptest.NewServer(sb.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		// The simulator's own logs never hold the token or a full card.
		for _, secret := range []string{token, goodCard, sandbox.DeclinedCard, "4111111111111112"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("sandbox log leaks %q", secret)
			}
		}
	})
	return sb, ts, logs
}

func client(t testing.TB, base string, timeout time.Duration) *psp.Client {
	t.Helper()
	c, err := psp.New(psp.Config{BaseURL: base, Token: psp.StaticToken(token), Timeout: timeout, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func wd(ext, amount string) psp.WithdrawalRequest {
	return psp.WithdrawalRequest{ExternalID: ext, Amount: money.MustParse(amount), Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: goodCard}}}
}

func do(t testing.TB, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMagicValues(t *testing.T) {
	if _, err := card.Normalize(sandbox.DeclinedCard); err != nil {
		t.Fatalf("declined card must be a valid card number: %v", err)
	}
	if _, err := money.Parse(sandbox.RefusedAmount, 2); err != nil {
		t.Fatalf("refused amount must be a valid amount: %v", err)
	}
}

func TestValidationAndAuth(t *testing.T) {
	const bearer = "Bearer " + token
	body := func(ext, amount, props string) string {
		return fmt.Sprintf(`{"externalId":%s,"amount":%s,"properties":%s}`, ext, amount, props)
	}
	cardProps := `[{"key":"cardNumber","value":"` + goodCard + `"}]`
	for _, tc := range []struct {
		name    string
		cfg     func(*sandbox.Config)
		method  string
		path    string
		auth    string
		body    string
		status  int
		stored  int
		contain string
	}{
		{name: "ok, amount as string", body: body(`"E1"`, `"10.50"`, cardProps), status: 200, stored: 1, contain: `"amount":"10.50"`},
		{name: "ok, amount as number kept exact", body: body(`"E1"`, `10.50`, cardProps), status: 200, stored: 1, contain: `"amount":"10.50"`},
		{name: "ok, spaced card", body: body(`"E1"`, `"1"`, `[{"key":"cardNumber","value":"4111 1111 1111 1111"}]`), status: 200, stored: 1, contain: `"pspDepositOrderID":"WD-`},
		{name: "ok, CardNumber key casing", body: body(`"E1"`, `"1"`, `[{"key":"CardNumber","value":"`+goodCard+`"}]`), status: 200, stored: 1},
		{name: "ok, telecom operator", body: body(`"E1"`, `"1"`, `[{"key":"telecomOperator","value":"OP1"}]`), status: 200, stored: 1},
		{name: "no auth", auth: "-", body: body(`"E1"`, `"1"`, cardProps), status: 401},
		{name: "wrong token", auth: "Bearer nope", body: body(`"E1"`, `"1"`, cardProps), status: 401},
		{name: "basic auth", auth: "Basic " + token, body: body(`"E1"`, `"1"`, cardProps), status: 401},
		{name: "forbidden", cfg: func(c *sandbox.Config) { c.Forbid = true }, body: body(`"E1"`, `"1"`, cardProps), status: 403},
		{name: "forbidden but wrong token", cfg: func(c *sandbox.Config) { c.Forbid = true }, auth: "Bearer x", body: body(`"E1"`, `"1"`, cardProps), status: 401},
		{name: "malformed JSON", body: `{"externalId":`, status: 400},
		{name: "trailing data", body: body(`"E1"`, `"1"`, cardProps) + `{}`, status: 400},
		{name: "not an object", body: `[1,2]`, status: 400},
		{name: "missing externalId", body: `{"amount":"1","properties":` + cardProps + `}`, status: 400, contain: "externalId"},
		{name: "numeric externalId", body: body(`7`, `"1"`, cardProps), status: 400},
		{name: "missing amount", body: `{"externalId":"E1","properties":` + cardProps + `}`, status: 400, contain: "amount"},
		{name: "comma amount", body: body(`"E1"`, `"10,50"`, cardProps), status: 400},
		{name: "negative amount", body: body(`"E1"`, `-5`, cardProps), status: 400},
		{name: "three decimals", body: body(`"E1"`, `"10.555"`, cardProps), status: 400},
		{name: "exponent", body: body(`"E1"`, `1e3`, cardProps), status: 400},
		{name: "zero", body: body(`"E1"`, `0`, cardProps), status: 400},
		{name: "refused amount string", body: body(`"E1"`, `"13.13"`, cardProps), status: 400, contain: "13.13"},
		{name: "refused amount number", body: body(`"E1"`, `13.13`, cardProps), status: 400},
		{name: "no properties", body: `{"externalId":"E1","amount":"1"}`, status: 400, contain: "destination"},
		{name: "misspelled properties", body: `{"externalId":"E1","amount":"1","propertiess":` + cardProps + `}`, status: 400},
		{name: "Luhn failure", body: body(`"E1"`, `"1"`, `[{"key":"cardNumber","value":"4111111111111112"}]`), status: 400, contain: "411111******1112"},
		{name: "card with letters", body: body(`"E1"`, `"1"`, `[{"key":"cardNumber","value":"4111x11111111111"}]`), status: 400},
		{name: "declined card", body: body(`"E1"`, `"1"`, `[{"key":"cardNumber","value":"`+sandbox.DeclinedCard+`"}]`), status: 422, contain: "declined"},
		{name: "over max amount", cfg: func(c *sandbox.Config) { c.MaxAmount = money.MustParse("100") }, body: body(`"E1"`, `"100.01"`, cardProps), status: 422},
		{name: "at max amount", cfg: func(c *sandbox.Config) { c.MaxAmount = money.MustParse("100") }, body: body(`"E1"`, `"100.00"`, cardProps), status: 200, stored: 1},
		{name: "status unknown", method: "GET", path: "/api/v1/integration/bridge/withdrawal-order/WD-x", status: 404},
		{name: "status without auth", method: "GET", path: "/api/v1/integration/bridge/withdrawal-order/WD-x", auth: "-", status: 401},
		{name: "wrong path", path: "/api/v1/withdrawal-order", body: body(`"E1"`, `"1"`, cardProps), status: 404},
		{name: "deposit ok", path: "/api/v1/integration/deposit-order/", body: `{"amount":5.00,"currency":"EUR","externalTransactionId":"D1"}`, status: 200, stored: 1, contain: `"orderStatus":"Processing"`},
		{name: "deposit without slash", path: "/api/v1/integration/deposit-order", body: `{"amount":"5","currency":"EUR","externalTransactionId":"D1"}`, status: 200, stored: 1},
		{name: "deposit bad currency", path: "/api/v1/integration/deposit-order/", body: `{"amount":5,"currency":"euro","externalTransactionId":"D1"}`, status: 400},
		{name: "deposit no id", path: "/api/v1/integration/deposit-order/", body: `{"amount":5,"currency":"EUR","externalTransactionId":""}`, status: 400},
		{name: "deposit declined card", path: "/api/v1/integration/deposit-order/", body: `{"amount":5,"currency":"EUR","externalTransactionId":"D1","additionalFields":[{"key":"cardNumber","value":"` + sandbox.DeclinedCard + `"}]}`, status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, ts, _ := start(t, tc.cfg)
			method, path, auth := tc.method, tc.path, tc.auth
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/api/v1/integration/bridge/withdrawal-order"
			}
			switch auth {
			case "":
				auth = bearer
			case "-":
				auth = ""
			}
			status, resp := do(t, method, ts.URL+path, auth, tc.body)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, resp, tc.status)
			}
			if !strings.Contains(resp, tc.contain) {
				t.Errorf("answer %s lacks %q", resp, tc.contain)
			}
			if strings.Contains(resp, goodCard) || strings.Contains(resp, "4111111111111112") || strings.Contains(resp, sandbox.DeclinedCard) || strings.Contains(resp, token) {
				t.Errorf("answer leaks a secret: %s", resp)
			}
			if n := len(sb.Orders()); n != tc.stored {
				t.Errorf("%d orders stored, want %d", n, tc.stored)
			}
		})
	}
}

// runLoop creates n withdrawals one after the other and returns the
// outcome of each.
func runLoop(t *testing.T, ts *httptest.Server, n int) []psp.Result {
	t.Helper()
	c := client(t, ts.URL, 10*time.Second)
	out := make([]psp.Result, n)
	for i := range out {
		out[i] = c.CreateWithdrawal(context.Background(), wd(fmt.Sprintf("EXT-%03d", i), "1.00"))
	}
	return out
}

// waitIdle polls until no PSP request is being handled (hangs end when
// the client goes away).
func waitIdle(t *testing.T, sb *sandbox.Server) sandbox.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := sb.Stats()
		if st.InFlight == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight", st.InFlight)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAmbiguousAnswersStoreOrdersReproducibly(t *testing.T) {
	type run struct {
		outcomes []string
		answers  map[string]int
		orderIDs []string
	}
	once := func() run {
		// Hangs end after 100ms with a 504 (HangFor), well within the
		// client's timeout, so that slow machines cannot change the
		// outcomes; hangs past the client's timeout are tested in
		// internal/psp.
		sb, ts, _ := start(t, func(c *sandbox.Config) { c.PAmbiguous = 0.3; c.Seed = 42; c.HangFor = 100 * time.Millisecond })
		results := runLoop(t, ts, 200)
		st := waitIdle(t, sb)
		orders := sb.Orders()
		byExt := map[string]sandbox.Order{}
		for _, o := range orders {
			byExt[o.ExternalID] = o
		}
		var r run
		created, ambiguous := 0, 0
		for i, res := range results {
			ext := fmt.Sprintf("EXT-%03d", i)
			r.outcomes = append(r.outcomes, res.Outcome.String())
			switch res.Outcome {
			case psp.Created:
				created++
				if byExt[ext].PSPOrderID != res.Order.OrderID || byExt[ext].Answer != "200" {
					t.Errorf("%s: created %q but the simulator holds %+v", ext, res.Order.OrderID, byExt[ext])
				}
			case psp.Ambiguous:
				ambiguous++
				if _, ok := byExt[ext]; !ok {
					t.Errorf("%s: ambiguous answer but no order stored", ext)
				}
			default:
				t.Errorf("%s: unexpected outcome %v (%s)", ext, res.Outcome, res.Message)
			}
		}
		if len(orders) != created+ambiguous || st.OrdersStored != len(orders) {
			t.Errorf("%d orders stored, want created %d + ambiguous %d", len(orders), created, ambiguous)
		}
		if len(orders) <= created || ambiguous < 30 || ambiguous > 90 {
			t.Errorf("p=0.3 over 200 creates: %d created, %d ambiguous", created, ambiguous)
		}
		if st.CreatesReceived != 200 || st.Answers["200"] != created {
			t.Errorf("stats %+v", st)
		}
		for _, kind := range []string{"500", "502", "503", "423", "hang", "drop"} {
			if st.Answers[kind] == 0 {
				t.Errorf("no %s answer among %v", kind, st.Answers)
			}
		}
		t.Logf("seed 42: %d creates, %d created, %d ambiguous, %d orders stored, answers %v", len(results), created, ambiguous, len(orders), st.Answers)
		r.answers = st.Answers
		for _, o := range orders {
			r.orderIDs = append(r.orderIDs, o.PSPOrderID)
		}
		return r
	}
	a, b := once(), once()
	if fmt.Sprint(a.outcomes) != fmt.Sprint(b.outcomes) || fmt.Sprint(a.answers) != fmt.Sprint(b.answers) || fmt.Sprint(a.orderIDs) != fmt.Sprint(b.orderIDs) {
		t.Errorf("two runs with seed 42 differ:\n%v\n%v", a.answers, b.answers)
	}
}

func TestPRefuseStoresNothing(t *testing.T) {
	sb, ts, _ := start(t, func(c *sandbox.Config) { c.PRefuse = 1 })
	res := runLoop(t, ts, 5)
	for _, r := range res {
		if r.Outcome != psp.Ambiguous || r.HTTPStatus != 423 {
			t.Errorf("%v %d", r.Outcome, r.HTTPStatus)
		}
	}
	if n := len(sb.Orders()); n != 0 {
		t.Errorf("%d orders stored", n)
	}
}

func TestStatusLag(t *testing.T) {
	const lag = 500 * time.Millisecond
	_, ts, _ := start(t, func(c *sandbox.Config) { c.StatusLag = lag })
	c := client(t, ts.URL, 2*time.Second)
	ctx := context.Background()
	created := c.CreateWithdrawal(ctx, wd("LAG-1", "3"))
	at := time.Now()
	if created.Outcome != psp.Created {
		t.Fatalf("create: %v", created.Outcome)
	}
	misses := 0
	deadline := at.Add(5 * time.Second)
	for {
		res := c.WithdrawalStatus(ctx, "LAG-1")
		if res.Outcome == psp.Created {
			if res.Order.OrderID != created.Order.OrderID {
				t.Errorf("found %q, created %q", res.Order.OrderID, created.Order.OrderID)
			}
			break
		}
		if res.Outcome != psp.NotFound {
			t.Fatalf("status: %v %s", res.Outcome, res.Message)
		}
		if since := time.Since(at); since >= lag+time.Second {
			t.Fatalf("still 404 %v after creation", since)
		}
		misses++
		if time.Now().After(deadline) {
			t.Fatal("deadline")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if misses == 0 {
		t.Errorf("the order was visible at once despite a %v lag", lag)
	}
	if since := time.Since(at); since < lag-50*time.Millisecond {
		t.Errorf("visible after %v, lag %v", since, lag)
	}
}

func TestOutageWindow(t *testing.T) {
	const from, dur = 400 * time.Millisecond, 600 * time.Millisecond
	began := time.Now()
	sb, ts, _ := start(t, func(c *sandbox.Config) { c.Outage = sandbox.Window{From: from, For: dur} })
	c := client(t, ts.URL, 2*time.Second)
	ctx := context.Background()
	if r := c.CreateWithdrawal(ctx, wd("before", "1")); r.Outcome != psp.Created {
		t.Fatalf("before the window: %v %d", r.Outcome, r.HTTPStatus)
	}
	// Poll until the outage shows, then until it ends.
	phase, outageAnswers := "waiting", 0
	deadline := time.Now().Add(10 * time.Second)
	for phase != "over" {
		if time.Now().After(deadline) {
			t.Fatalf("deadline in phase %s", phase)
		}
		before := len(sb.Orders())
		r := c.CreateWithdrawal(ctx, wd("probe", "1"))
		switch {
		case r.HTTPStatus == 503:
			if r.Outcome != psp.Ambiguous {
				t.Errorf("503 classified %v", r.Outcome)
			}
			if len(sb.Orders()) != before {
				t.Errorf("an order was stored during the outage")
			}
			if el := time.Since(began); el < from {
				t.Errorf("503 at %v, before the window", el)
			}
			phase = "outage"
			outageAnswers++
		case r.Outcome == psp.Created && phase == "outage":
			if el := time.Since(began); el < from+dur {
				t.Errorf("outage ended after %v, window ends at %v", el, from+dur)
			}
			phase = "over"
		case r.Outcome != psp.Created:
			t.Fatalf("unexpected %v %d", r.Outcome, r.HTTPStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if outageAnswers == 0 {
		t.Error("no 503 seen")
	}
	// Status queries and the admin API during an outage: admin unaffected.
	if err := sb.SetFaults(sandbox.Faults{Outage: sandbox.Window{From: 0, For: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if r := c.WithdrawalStatus(ctx, "before"); r.HTTPStatus != 503 || r.Outcome != psp.Ambiguous {
		t.Errorf("status in outage: %v %d", r.Outcome, r.HTTPStatus)
	}
	if code, _ := do(t, "GET", ts.URL+"/sandbox/stats", "", ""); code != 200 {
		t.Errorf("admin API during outage: %d", code)
	}
}

func TestParseWindow(t *testing.T) {
	for in, want := range map[string]sandbox.Window{
		"":         {},
		"10s:30s":  {From: 10 * time.Second, For: 30 * time.Second},
		"0s:1m30s": {For: 90 * time.Second},
	} {
		got, err := sandbox.ParseWindow(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
		if got.String() != "" {
			if back, _ := sandbox.ParseWindow(got.String()); back != got {
				t.Errorf("round trip %q", got.String())
			}
		}
	}
	for _, bad := range []string{"10s", "x:1s", "1s:y", "-1s:2s"} {
		if _, err := sandbox.ParseWindow(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestForceQueue(t *testing.T) {
	sb, ts, _ := start(t, nil)
	c := client(t, ts.URL, 2*time.Second)
	ctx := context.Background()
	created := c.CreateWithdrawal(ctx, wd("F-1", "1"))
	if err := sb.Force(sandbox.Force{Status: 500, Count: 2, Op: sandbox.OpWithdrawalStatus}); err != nil {
		t.Fatal(err)
	}
	// A create is not matched by a status-only entry.
	if r := c.CreateWithdrawal(ctx, wd("F-2", "1")); r.Outcome != psp.Created {
		t.Errorf("create hit a status-only force: %v", r.Outcome)
	}
	for i, want := range []int{500, 500, 200} {
		if r := c.WithdrawalStatus(ctx, created.Order.OrderID); r.HTTPStatus != want {
			t.Errorf("status query %d: %d, want %d", i, r.HTTPStatus, want)
		}
	}
	// Store entries wait for a valid create.
	if err := sb.Force(sandbox.Force{Status: 502, Store: true}); err != nil {
		t.Fatal(err)
	}
	if r := c.CreateWithdrawal(ctx, wd("F-3", sandbox.RefusedAmount)); r.HTTPStatus != 400 {
		t.Errorf("invalid create: %d", r.HTTPStatus)
	}
	if r := c.CreateWithdrawal(ctx, wd("F-3", "1")); r.HTTPStatus != 502 {
		t.Errorf("forced store: %d", r.HTTPStatus)
	}
	orders := sb.Orders()
	if last := orders[len(orders)-1]; last.ExternalID != "F-3" || last.Answer != "502" {
		t.Errorf("last order %+v", last)
	}
	for _, bad := range []sandbox.Force{{}, {Status: 200}, {Status: 500, Fault: "hang"}, {Fault: "boom"}, {Status: 500, Op: "nope"}, {Status: 500, Store: true, Op: sandbox.OpWithdrawalStatus}, {Status: 500, Count: -1}} {
		if err := sb.Force(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestAdminAPI(t *testing.T) {
	sb, ts, _ := start(t, nil)
	c := client(t, ts.URL, 2*time.Second)
	ctx := context.Background()
	c.CreateWithdrawal(ctx, wd("A-1", "10.50"))
	second := c.CreateWithdrawal(ctx, wd("A-1", "10.50")) // no deduplication
	if r := c.WithdrawalStatus(ctx, "A-1"); r.Order.OrderID != second.Order.OrderID {
		t.Errorf("status by externalId found %q, want the latest %q", r.Order.OrderID, second.Order.OrderID)
	}

	code, body := do(t, "GET", ts.URL+"/sandbox/orders", "", "")
	if code != 200 || strings.Contains(body, goodCard) || !strings.Contains(body, "411111******1111") {
		t.Fatalf("orders %d %s", code, body)
	}
	var orders []map[string]any
	if err := json.Unmarshal([]byte(body), &orders); err != nil || len(orders) != 2 {
		t.Fatalf("orders: %v %s", err, body)
	}
	for _, k := range []string{"pspOrderId", "externalId", "amount", "properties", "status", "createdAt"} {
		if _, ok := orders[0][k]; !ok {
			t.Errorf("order lacks %s", k)
		}
	}
	if orders[0]["pspOrderId"] == orders[1]["pspOrderId"] {
		t.Errorf("same id twice")
	}

	code, body = do(t, "GET", ts.URL+"/sandbox/stats", "", "")
	var st sandbox.Stats
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("stats %d %s", code, body)
	}
	if st.CreatesReceived != 2 || st.CreatesByExternalID["A-1"] != 2 || st.OrdersStored != 2 || st.StatusQueries != 1 || st.Answers["200"] != 3 || st.Seed != 1 {
		t.Errorf("stats %+v", st)
	}

	code, body = do(t, "PUT", ts.URL+"/sandbox/faults", "", `{"pAmbiguous":0.5,"latency":"5ms","outage":"1h:1m","maxAmount":"99.99"}`)
	if code != 200 {
		t.Fatalf("put faults %d %s", code, body)
	}
	f := sb.Faults()
	if f.PAmbiguous != 0.5 || f.Latency != 5*time.Millisecond || f.Outage != (sandbox.Window{From: time.Hour, For: time.Minute}) || f.MaxAmount.String() != "99.99" || f.HangFor != sandbox.DefaultHangFor {
		t.Errorf("faults %+v", f)
	}
	code, body = do(t, "GET", ts.URL+"/sandbox/faults", "", "")
	if code != 200 || !strings.Contains(body, `"pAmbiguous":0.5`) || !strings.Contains(body, `"latency":"5ms"`) {
		t.Errorf("get faults %d %s", code, body)
	}
	for _, bad := range []string{`{"pAmbiguous":2}`, `{"latency":"soon"}`, `{"outage":"1h"}`, `{"maxAmount":"-1"}`, `{"unknown":1}`, `{`} {
		if code, _ := do(t, "PUT", ts.URL+"/sandbox/faults", "", bad); code != 400 {
			t.Errorf("PUT %s: %d", bad, code)
		}
	}
	if sb.Faults().PAmbiguous != 0.5 {
		t.Errorf("a refused PUT changed the faults")
	}

	if code, body := do(t, "POST", ts.URL+"/sandbox/force", "", `{"status":429,"count":1,"retryAfter":"2"}`); code != 200 {
		t.Fatalf("force %d %s", code, body)
	}
	if code, body := do(t, "GET", ts.URL+"/sandbox/force", "", ""); code != 200 || !strings.Contains(body, `"status":429`) {
		t.Errorf("pending %d %s", code, body)
	}
	if code, _ := do(t, "POST", ts.URL+"/sandbox/force", "", `{"fault":"explode"}`); code != 400 {
		t.Errorf("bad force accepted")
	}
	if r := c.WithdrawalStatus(ctx, "A-1"); r.HTTPStatus != 429 || r.RetryAfter != 2*time.Second {
		t.Errorf("forced 429: %d %v", r.HTTPStatus, r.RetryAfter)
	}
	do(t, "POST", ts.URL+"/sandbox/force", "", `{"status":500,"count":5}`)
	if code, _ := do(t, "DELETE", ts.URL+"/sandbox/force", "", ""); code != 200 {
		t.Errorf("delete force: %d", code)
	}

	if code, _ := do(t, "POST", ts.URL+"/sandbox/reset", "", ""); code != 200 {
		t.Fatalf("reset %d", code)
	}
	if st := sb.Stats(); len(sb.Orders()) != 0 || st.CreatesReceived != 0 || len(st.Answers) != 0 {
		t.Errorf("after reset: %+v", st)
	}
	if code, body := do(t, "GET", ts.URL+"/sandbox/health", "", ""); code != 200 || body != "ok\n" {
		t.Errorf("health %d %q", code, body)
	}
}

func TestRegisterFlags(t *testing.T) {
	fs := flagSet()
	cfg := sandbox.RegisterFlags(fs)
	err := fs.Parse([]string{"--token", "t1", "--forbid", "--reject-above", "500.00", "--latency", "10ms", "--latency-jitter", "5ms",
		"--p-refuse", "0.1", "--p-ambiguous", "0.3", "--status-lag", "2s", "--outage", "10s:30s", "--seed", "9", "--hang-for", "1m",
		"--settle-after", "2s", "--p-fail", "0.2", "--paid-status", "SUCCESS", "--failed-status", "DECLINED",
		"--callback-url", "http://127.0.0.1:9/cb", "--callback-secret", "s3", "--p-callback-dup", "0.5", "--callback-delay", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Config{Token: "t1", Seed: 9, Faults: sandbox.Faults{Forbid: true, MaxAmount: money.MustParse("500.00"), Latency: 10 * time.Millisecond,
		LatencyJitter: 5 * time.Millisecond, PRefuse: 0.1, PAmbiguous: 0.3, StatusLag: 2 * time.Second, Outage: sandbox.Window{From: 10 * time.Second, For: 30 * time.Second}, HangFor: time.Minute},
		SettleAfter: 2 * time.Second, PFail: 0.2, PaidStatus: "SUCCESS", FailedStatus: "DECLINED", ReturnedStatus: "Returned",
		CallbackURL: "http://127.0.0.1:9/cb", CallbackSecret: "s3", PCallbackDup: 0.5, CallbackDelay: time.Second}
	got := *cfg
	if got.MaxAmount.Cmp(want.MaxAmount) != 0 {
		t.Errorf("max amount %s", got.MaxAmount)
	}
	got.MaxAmount, want.MaxAmount = money.Amount{}, money.Amount{}
	if got != want {
		t.Errorf("cfg %+v", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	defaults := sandbox.RegisterFlags(flagSet())
	if defaults.Token != sandbox.DefaultToken || defaults.HangFor != sandbox.DefaultHangFor || defaults.Validate() != nil {
		t.Errorf("defaults %+v", *defaults)
	}
	for _, args := range [][]string{{"--p-ambiguous", "1.5"}, {"--p-refuse", "x"}, {"--outage", "10s"}, {"--reject-above", "1,5"}} {
		if err := flagSet().Parse(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if err := (sandbox.Config{Token: "", Faults: sandbox.Faults{}}).Validate(); err == nil {
		t.Error("empty token accepted")
	}
	if err := (sandbox.Config{Token: "x", Faults: sandbox.Faults{StatusLag: -time.Second}}).Validate(); err == nil {
		t.Error("negative lag accepted")
	}
}

func TestServeGracefulShutdownEndsHangs(t *testing.T) {
	sb := sandbox.New(sandbox.Config{Token: token, Seed: 1}, zerolog.Nop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sb.Serve(ctx, ln) }()
	if err := sb.Force(sandbox.Force{Fault: sandbox.FaultHang}); err != nil {
		t.Fatal(err)
	}
	c := client(t, "http://"+ln.Addr().String(), time.Minute)
	got := make(chan psp.Result, 1)
	go func() { got <- c.CreateWithdrawal(context.Background(), wd("H", "1")) }()
	deadline := time.Now().Add(5 * time.Second)
	for sb.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hanging request never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(7 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if r := <-got; r.Outcome != psp.Ambiguous {
		t.Errorf("hung request: %v", r.Outcome)
	}
}

func TestLatency(t *testing.T) {
	sb, ts, _ := start(t, func(c *sandbox.Config) { c.Latency = 100 * time.Millisecond; c.LatencyJitter = 50 * time.Millisecond })
	c := client(t, ts.URL, 2*time.Second)
	r := c.CreateWithdrawal(context.Background(), wd("L", "1"))
	if r.Outcome != psp.Created || r.Duration < 100*time.Millisecond {
		t.Errorf("%v after %v", r.Outcome, r.Duration)
	}
	// Latency longer than the client's patience: a timeout, ambiguous.
	if err := sb.SetFaults(sandbox.Faults{Latency: time.Second}); err != nil {
		t.Fatal(err)
	}
	fast := client(t, ts.URL, 100*time.Millisecond)
	if r := fast.CreateWithdrawal(context.Background(), wd("L2", "1")); r.Outcome != psp.Ambiguous || !r.Sent {
		t.Errorf("%v sent=%v", r.Outcome, r.Sent)
	}
}

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
