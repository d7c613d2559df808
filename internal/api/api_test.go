package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/api"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
)

// env is an API over miniredis, its requests and responses checked
// against openapi.yaml by kin-openapi (openapi3filter).
type env struct {
	t      *testing.T
	rdb    redis.UniversalClient
	srv    *httptest.Server
	router routers.Router
	tokens map[string]string // name -> secret
}

func init() {
	openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/problem+json", openapi3filter.JSONBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", openapi3filter.FileBodyDecoder)
}

func newEnv(t *testing.T, tune func(*api.Config)) *env {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	led := ledger.New(rdb)
	cfg := api.Config{Redis: rdb, Loader: loader.New(led, queue.New(rdb), vault.Ephemeral(), zerolog.Nop()),
		Load:    loader.Options{Approval: loader.Approval{Required: true, FourEyes: true}},
		Staging: t.TempDir(), Log: zerolog.Nop()}
	if tune != nil {
		tune(&cfg)
	}
	s, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, rdb: rdb, tokens: map[string]string{}}
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(e.srv.Close)
	doc, err := api.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: e.srv.URL}}
	if e.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]access.Role{"erp": access.Maker, "boss": access.Approver, "ops": access.Operator, "audit": access.Viewer} {
		secret, _, err := api.NewTokens(rdb).Create(context.Background(), name, role, "test")
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[name] = secret
	}
	return e
}

// req is one request of a test.
type req struct {
	method, path, token, key string
	body                     any // marshalled unless an io.Reader or []byte
	// hostile: the request breaks the spec on purpose; only the
	// response is checked against it.
	hostile bool
	header  http.Header
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
}

func (e *env) do(r req) answer {
	e.t.Helper()
	var body io.Reader
	var raw []byte
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body = b
	case []byte:
		raw = b
	default:
		raw, _ = json.Marshal(b)
	}
	if raw != nil {
		body = bytes.NewReader(raw)
	}
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range r.header {
		hr.Header[k] = v
	}
	if body != nil && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+e.tokens[r.token])
	}
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	in := e.validateRequest(hr, raw, r.hostile)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	e.validateResponse(in, resp, got)
	return answer{status: resp.StatusCode, header: resp.Header, body: got}
}

func (e *env) validateRequest(hr *http.Request, raw []byte, hostile bool) *openapi3filter.RequestValidationInput {
	e.t.Helper()
	route, params, err := e.router.FindRoute(hr)
	if err != nil {
		if hostile {
			return nil
		}
		e.t.Fatalf("%s %s: not in the spec: %v", hr.Method, hr.URL.Path, err)
	}
	check, _ := http.NewRequest(hr.Method, hr.URL.String(), bytes.NewReader(raw))
	check.Header = hr.Header.Clone()
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && !hostile {
		e.t.Fatalf("%s %s: the request differs from the spec: %v", hr.Method, hr.URL.Path, err)
	}
	return in
}

func (e *env) validateResponse(in *openapi3filter.RequestValidationInput, resp *http.Response, body []byte) {
	e.t.Helper()
	if in == nil {
		return
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		e.t.Fatalf("%s %s -> %d: the response differs from the spec: %v\n%s", in.Request.Method, in.Request.URL.Path, resp.StatusCode, err, body)
	}
}

// items are n valid items, ids PREFIX-i.
func items(prefix string, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"externalId": fmt.Sprintf("%s-%04d", prefix, i), "amount": fmt.Sprintf("%d.50", 10+i),
			"destination": map[string]string{"cardNumber": "4111 1111 1111 1111"}, "info": map[string]string{"recipient": "R " + fmt.Sprint(i)}}
	}
	return out
}

func expect(t *testing.T, a answer, status int, what string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, a.status, status, a.body)
	}
}

func TestCreateRetryPageApproveDownload(t *testing.T) {
	e := newEnv(t, nil)
	body := map[string]any{"name": "june", "expectRows": 3, "expectTotal": "34.50", "items": items("PO-A", 3)}
	first := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "k-1", body: body})
	expect(t, first, 201, "create")
	var b api.Batch
	first.json(t, &b)
	if b.Phase != "awaiting_approval" || b.Rows != 3 || b.Total != "34.50" || b.LoadedBy != "token:erp" || first.header.Get("Location") != b.Links.Self {
		t.Fatalf("created batch: %+v (Location %q)", b, first.header.Get("Location"))
	}
	again := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "k-1", body: body})
	if again.status != 201 || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry with the same key: %d %q %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	other := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "k-1", body: map[string]any{"items": items("PO-B", 1)}})
	expect(t, other, 422, "the same key, another body")
	sameItems := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "k-2", body: body})
	expect(t, sameItems, 200, "the same items under another key (content hash)")
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "k-3", body: map[string]any{"items": items("PO-C", 2)}}), 201, "second batch")

	// Paging to the end: batches one at a time, payouts two at a time.
	seen, next := 0, "/api/v1/batches?limit=1"
	for next != "" {
		var page struct {
			Items []api.Batch
			Next  string
		}
		e.do(req{method: "GET", path: next, token: "audit"}).json(t, &page)
		seen += len(page.Items)
		next = page.Next
	}
	if seen != 2 {
		t.Fatalf("batches paged: %d, want 2", seen)
	}
	var ids []string
	for next = b.Links.Payouts + "?limit=2"; next != ""; {
		var page struct {
			Items []api.Payout
			Next  string
		}
		e.do(req{method: "GET", path: next, token: "audit"}).json(t, &page)
		for _, p := range page.Items {
			ids = append(ids, p.ExternalID)
			if p.Destination != "card 411111******1111" || p.Info["recipient"] == "" {
				t.Fatalf("payout: %+v", p)
			}
		}
		next = page.Next
	}
	if strings.Join(ids, ",") != "PO-A-0000,PO-A-0001,PO-A-0002" {
		t.Fatalf("payouts paged: %v", ids)
	}

	// The maker may not approve; the approver may.
	expect(t, e.do(req{method: "POST", path: b.Links.Self + "/approve", token: "erp", key: "a-1", body: map[string]string{}}), 403, "approve by the maker")
	ok := e.do(req{method: "POST", path: b.Links.Self + "/approve", token: "boss", key: "a-2", body: map[string]string{"note": "checked"}})
	expect(t, ok, 200, "approve")
	twice := e.do(req{method: "POST", path: b.Links.Self + "/approve", token: "boss", key: "a-3", body: map[string]string{"note": "again"}})
	expect(t, twice, 409, "approve twice")
	var got api.Batch
	e.do(req{method: "GET", path: b.Links.Self, token: "audit"}).json(t, &got)
	if got.Approval.DecidedBy != "token:boss" || got.Totals["queued"].Count != 3 {
		t.Fatalf("approved batch: %+v", got)
	}
	for _, kind := range []string{"result.csv", "summary.txt", "failed.csv", "audit.csv", "result.xlsx"} {
		d := e.do(req{method: "GET", path: b.Links.Self + "/files/" + kind, token: "audit"})
		expect(t, d, 200, kind)
		if kind == "audit.csv" && !bytes.Contains(d.body, []byte("token:boss")) {
			t.Fatalf("audit trail without the token's identity: %s", d.body)
		}
	}
	var found struct{ Items []api.Payout }
	e.do(req{method: "GET", path: "/api/v1/payouts/po-a-0001", token: "audit"}).json(t, &found)
	if len(found.Items) != 1 || found.Items[0].ExternalID != "PO-A-0001" || found.Items[0].State != "queued" {
		t.Fatalf("payout by id: %+v", found)
	}
}
