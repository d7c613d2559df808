package ui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestLedgerUnreachablePage: with Redis away, a person gets a page that
// says payments are on hold and nothing is lost, and that tries again; the
// JSON API a short text; neither the ledger's error.
func TestLedgerUnreachablePage(t *testing.T) {
	h := &batchHandlers{log: zerolog.Nop()}
	cause := errors.New("dial tcp 10.0.0.5:6379: connect: connection refused")
	for _, tt := range []struct {
		path, want, contentType string
	}{
		{"/batches", "Payments are on hold", "text/html"},
		{"/", `http-equiv="refresh"`, "text/html"},
		{"/api/batches", "the ledger cannot be reached", "text/plain"},
	} {
		rec := httptest.NewRecorder()
		h.fail(rec, httptest.NewRequest(http.MethodGet, tt.path, nil), cause)
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, tt.want) ||
			!strings.HasPrefix(rec.Header().Get("Content-Type"), tt.contentType) {
			t.Errorf("%s: %d %q %q, want 503 %s with %q", tt.path, rec.Code, rec.Header().Get("Content-Type"), body, tt.contentType, tt.want)
		}
		if strings.Contains(body, "10.0.0.5") {
			t.Errorf("%s: the page shows the ledger's error: %q", tt.path, body)
		}
	}
}
