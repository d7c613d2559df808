package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acme/payout/internal/psp"
)

// fakeOrder is what the fake PSP answers about one status path {id}.
type fakeOrder struct {
	ExternalID string `json:"externalId"`
	OrderID    string `json:"pspDepositOrderID"`
	Status     string `json:"status"`
	Amount     string `json:"amount"`
}

// fakePSP serves withdrawal status queries from orders (keyed by the id
// in the path: an order id or an externalId; any other id is 404) and
// returns the environment that points the CLI at it.
func fakePSP(t *testing.T, orders map[string]fakeOrder) map[string]string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, psp.PathWithdrawalStatus)
		o, found := orders[id]
		if !ok || r.Method != http.MethodGet || !found {
			http.Error(w, `{"message":"order not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(o)
	}))
	t.Cleanup(srv.Close)
	return map[string]string{"PAYOUT_PSP_URL": srv.URL, "PAYOUT_PSP_TOKEN": "test-token-0123456789"}
}
