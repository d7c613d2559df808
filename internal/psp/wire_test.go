package psp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

// pathRecorder is a PSP front end that records the escaped path of every
// request and answers with answer(path).
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) server(t *testing.T, answer func(w http.ResponseWriter, path string)) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.URL.EscapedPath())
		p.mu.Unlock()
		answer(w, r.URL.EscapedPath())
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (p *pathRecorder) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.paths) == 0 {
		return ""
	}
	return p.paths[len(p.paths)-1]
}

// TestStatusPathEncoding: every status query (by either id, and the API
// check) puts the id into the path as one segment with everything outside
// RFC 3986's unreserved set percent-encoded (issue 38: url.PathEscape left
// ":@+=&$," as they were, which a front end is free to act on).
func TestStatusPathEncoding(t *testing.T) {
	var rec pathRecorder
	ts := rec.server(t, func(w http.ResponseWriter, _ string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"order not found"}`))
	})
	c := newClient(t, ts.URL, nil)
	ctx := context.Background()
	tests := []struct {
		id, path string
	}{
		{"PO-1", "PO-1"},
		{"PO:1@a+b=c&d$e,f", "PO%3A1%40a%2Bb%3Dc%26d%24e%2Cf"},
		{"PO 1 (x)!*'", "PO%201%20%28x%29%21%2A%27"},
		{"Итого-1", "%D0%98%D1%82%D0%BE%D0%B3%D0%BE-1"},
	}
	for _, tt := range tests {
		want := psp.PathWithdrawalStatus + tt.path
		c.WithdrawalStatus(ctx, tt.id)
		if got := rec.last(); got != want {
			t.Errorf("WithdrawalStatus(%q) asked %q, want %q", tt.id, got, want)
		}
		c.CheckWithdrawal(ctx, psp.Expect{ExternalID: tt.id})
		if got := rec.last(); got != want {
			t.Errorf("CheckWithdrawal by externalId %q asked %q, want %q", tt.id, got, want)
		}
		c.CheckWithdrawal(ctx, psp.Expect{ExternalID: "E", OrderID: tt.id})
		if got := rec.last(); got != want {
			t.Errorf("CheckWithdrawal by order id %q asked %q, want %q", tt.id, got, want)
		}
	}
	c.CheckAPI(ctx)
	if got := rec.last(); !strings.HasPrefix(got, psp.PathWithdrawalStatus+"payout-check-") {
		t.Errorf("CheckAPI asked %q", got)
	}
}

// TestStatusAnswerForAnotherPath: an answer that is not about the path
// asked is Ambiguous, never NotFound (the only answer that lets a payout
// be created again) and never Created.
func TestStatusAnswerForAnotherPath(t *testing.T) {
	const order = `{"pspDepositOrderID":"ORD-9","externalId":"OTHER-9","amount":"1.00","status":"Created"}`
	notFound := func(w http.ResponseWriter, _ string) {
		http.Error(w, `{"message":"order not found"}`, http.StatusNotFound)
	}
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, path string)
		id     string
		byExt  bool // CheckWithdrawal by externalId, else WithdrawalStatus
		want   psp.Outcome
		msg    string
	}{
		// A front end that removes dot segments routes "withdrawal-order/.."
		// to ".../bridge", whose 404 is about that path.
		{"404 for a dot segment", notFound, "..", false, psp.Ambiguous, "another path"},
		{"404 for a dot segment, by externalId", notFound, "..", true, psp.Ambiguous, "another path"},
		{"404 for a single dot", notFound, ".", true, psp.Ambiguous, "another path"},
		{"404 for an id with a slash", notFound, "PO/1", true, psp.Ambiguous, "another path"},
		{"404 for an id with a percent sign", notFound, "PO%2e", true, psp.Ambiguous, "another path"},
		{"404 for a safe id is absence", notFound, "PO-1", true, psp.NotFound, ""},
		{"redirect", func(w http.ResponseWriter, _ string) {
			w.Header().Set("Location", "/api/v1/integration/bridge/")
			w.WriteHeader(http.StatusMovedPermanently)
		}, "PO-1", true, psp.Ambiguous, "redirect"},
		{"temporary redirect", func(w http.ResponseWriter, _ string) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}, "PO-1", false, psp.Ambiguous, "redirect"},
		{"200 about another order", func(w http.ResponseWriter, _ string) { _, _ = w.Write([]byte(order)) },
			"PO-1", false, psp.Ambiguous, "does not name the id asked"},
		{"200 about another order, by externalId", func(w http.ResponseWriter, _ string) { _, _ = w.Write([]byte(order)) },
			"PO-1", true, psp.Ambiguous, "externalId expected"},
		{"200 about the order asked by its order id", func(w http.ResponseWriter, _ string) { _, _ = w.Write([]byte(order)) },
			"ORD-9", false, psp.Created, ""},
		{"200 about the order asked by its externalId", func(w http.ResponseWriter, _ string) { _, _ = w.Write([]byte(order)) },
			"OTHER-9", false, psp.Created, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec pathRecorder
			ts := rec.server(t, tt.answer)
			c := newClient(t, ts.URL, nil)
			var res psp.Result
			if tt.byExt {
				res = c.CheckWithdrawal(context.Background(), psp.Expect{ExternalID: tt.id, Amount: money.MustParse("1.00")})
			} else {
				res = c.WithdrawalStatus(context.Background(), tt.id)
			}
			if res.Outcome != tt.want || !strings.Contains(res.Message, tt.msg) {
				t.Fatalf("%s: outcome %s %q, want %s with %q", rec.last(), res.Outcome, res.Message, tt.want, tt.msg)
			}
		})
	}
}
