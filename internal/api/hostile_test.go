package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/api"
	"github.com/acme/payout/internal/ledger/keys"
)

// problem is a problem details answer.
type problem struct {
	Type, Title, Detail string
	Status              int
	Errors              []struct {
		Index  *int
		Field  string
		Detail string
	}
}

// TestHostileItemsAreRefusedAsInAFile: what the file intake refuses is
// refused through the API, the whole batch, each error with its item
// index and field, and nothing is loaded.
func TestHostileItemsAreRefusedAsInAFile(t *testing.T) {
	e := newEnv(t, nil)
	card := map[string]string{"cardNumber": "4111111111111111"}
	cases := []struct {
		name  string
		item  map[string]any
		field string
		says  string
	}{
		{"card in info", map[string]any{"externalId": "H-1", "amount": "1", "destination": card, "info": map[string]string{"note": "4111 1111 1111 1111"}}, "info.note", "card"},
		{"card in externalId", map[string]any{"externalId": "4111111111111111", "amount": "1", "destination": card}, "externalId", "card"},
		{"huge amount", map[string]any{"externalId": "H-2", "amount": "99999999999999999999999", "destination": card}, "amount", ""},
		{"exponent", map[string]any{"externalId": "H-3", "amount": "1e3", "destination": card}, "amount", ""},
		{"JSON number", map[string]any{"externalId": "H-4", "amount": 1500, "destination": card}, "amount", "never JSON numbers"},
		{"control character", map[string]any{"externalId": "H-\u0007", "amount": "1", "destination": card}, "externalId", "control character"},
		{"newline in info", map[string]any{"externalId": "H-5", "amount": "1", "destination": card, "info": map[string]string{"note": "a\nb"}}, "info.note", "control character"},
		{"formula id", map[string]any{"externalId": "=HYPERLINK(1)", "amount": "1", "destination": card}, "externalId", ""},
		{"two destinations", map[string]any{"externalId": "H-6", "amount": "1", "destination": map[string]string{"cardNumber": "4111111111111111", "telecomOperator": "MTS"}}, "", ""},
		{"card outside destination", map[string]any{"externalId": "H-7", "amount": "1", "destination": card, "cardNumber": "4111111111111111"}, "cardNumber", "only in destination.cardNumber"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := items("OK", 2)
			body := map[string]any{"items": []any{good[0], c.item, good[1]}}
			a := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "h-" + string(rune('a'+i)), body: body, hostile: true})
			expect(t, a, 422, c.name)
			var p problem
			a.json(t, &p)
			if p.Type != api.TypeBase+api.KindRefusedItems || len(p.Errors) == 0 {
				t.Fatalf("problem: %+v", p)
			}
			hit := false
			for _, ie := range p.Errors {
				if ie.Index != nil && *ie.Index == 1 && ie.Field == c.field && strings.Contains(ie.Detail, c.says) {
					hit = true
				}
				if strings.Contains(ie.Detail, "4111111111111111") || strings.Contains(ie.Detail, "4111 1111 1111 1111") {
					t.Fatalf("a full card number in an error: %+v", ie)
				}
			}
			if !hit {
				t.Fatalf("no error at index 1 field %q saying %q: %s", c.field, c.says, a.body)
			}
		})
	}
	var page struct{ Items []api.Batch }
	e.do(req{method: "GET", path: "/api/v1/batches", token: "audit"}).json(t, &page)
	if len(page.Items) != 0 {
		t.Fatalf("a refused create loaded something: %+v", page.Items)
	}
}

func TestLookAlikeIDsAreOneID(t *testing.T) {
	e := newEnv(t, nil)
	first := items("LA", 1)
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "la-1", body: map[string]any{"items": first}}), 201, "first")
	twin := items("la", 1) // la-0000: PO ids compare ignoring case
	a := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "la-2", body: map[string]any{"items": twin}})
	expect(t, a, 422, "the same id in another case, in another batch")
	inOne := items("X", 2)
	inOne[1]["externalId"] = "x-0000"
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "la-3", body: map[string]any{"items": inOne}}), 422, "the same id twice in one batch")
}

// endless is n bytes of an items array that never ends well.
func endless(n int64) io.Reader {
	item := []byte(`{"externalId":"BIG","amount":"1","destination":{"cardNumber":"4111111111111111"}},`)
	return io.MultiReader(strings.NewReader(`{"items":[`), io.LimitReader(&repeat{b: item}, n))
}

type repeat struct {
	b []byte
	i int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.b[r.i:])
		n += c
		r.i = (r.i + c) % len(r.b)
	}
	return n, nil
}

func TestBodiesAreBounded(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxItems = 100 })
	a := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "big", body: endless(100 << 20), hostile: true})
	expect(t, a, 413, "a 100 MB body")
	many := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "many", body: map[string]any{"items": items("M", 101)}, hostile: true})
	expect(t, many, 413, "more items than the limit")
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "notjson", body: []byte(`{"items": [`), hostile: true}), 400, "cut JSON")
}

func TestAccess(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.Rate = 2 })
	expect(t, e.do(req{method: "GET", path: "/api/v1/batches", hostile: true}), 401, "no token")
	cookie := http.Header{"Cookie": {"payout_session=anything"}}
	expect(t, e.do(req{method: "GET", path: "/api/v1/batches", header: cookie, hostile: true}), 401, "a console session cookie")
	basic := http.Header{"Authorization": {"Basic b3BzOnNlY3JldA=="}}
	expect(t, e.do(req{method: "GET", path: "/api/v1/batches", header: basic, hostile: true}), 401, "a Basic login")
	expect(t, e.do(req{method: "POST", path: "/api/v1/queue/pause", token: "audit", key: "p", body: map[string]string{}}), 403, "a viewer pausing")
	expect(t, e.do(req{method: "POST", path: "/api/v1/queue/pause", token: "ops", body: map[string]string{}, hostile: true}), 400, "a POST without a key")
	limited := false
	deadline := time.Now().Add(5 * time.Second)
	for !limited && time.Now().Before(deadline) {
		a := e.do(req{method: "GET", path: "/api/v1/batches", token: "audit"})
		if a.status == 429 {
			limited = a.header.Get("Retry-After") != ""
		}
	}
	if !limited {
		t.Fatal("no 429 with Retry-After at 2 requests a second")
	}
	if err := api.NewTokens(e.rdb).Revoke(t.Context(), "erp"); err != nil {
		t.Fatal(err)
	}
	expect(t, e.do(req{method: "GET", path: "/api/v1/batches", token: "erp"}), 401, "a revoked token")
}

// TestKeyInFlightIs409: while the first request with a key runs (its
// lease in Redis), the same key is answered 409; once the lease expired
// (the first died), the retry runs.
func TestKeyInFlightIs409(t *testing.T) {
	e := newEnv(t, nil)
	sum := sha256hex("k-run")
	e.rdb.Set(t.Context(), keys.Idempotency("token:ops", sum), `{"owner":"someone","sum":"x"}`, time.Minute)
	a := e.do(req{method: "POST", path: "/api/v1/queue/pause", token: "ops", key: "k-run", body: map[string]string{"note": "maintenance"}})
	expect(t, a, 409, "the key's first request still running")
	e.rdb.Del(t.Context(), keys.Idempotency("token:ops", sum))
	a = e.do(req{method: "POST", path: "/api/v1/queue/pause", token: "ops", key: "k-run", body: map[string]string{"note": "maintenance"}})
	expect(t, a, 200, "after the lease expired")
	if ttl := e.rdb.TTL(t.Context(), keys.Idempotency("token:ops", sum)).Val(); ttl < 24*time.Hour {
		t.Fatalf("answer kept %s, want at least 24h", ttl)
	}
	var d api.Done
	a.json(t, &d)
	if !strings.Contains(d.Message, "paused by token:ops") {
		t.Fatalf("pause: %+v", d)
	}
	_ = bytes.MinRead
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
