package sandbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/acme/payout/internal/sandbox"
)

// TestAdminClient drives every admin endpoint through sandbox.Admin and
// checks it against the server's own view.
func TestAdminClient(t *testing.T) {
	sb, ts, _ := start(t, nil)
	ctx := context.Background()
	adm := sandbox.Admin{URL: ts.URL + "/"}
	if err := adm.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if code := createWD(t, ts.URL, "ADM-1"); code != http.StatusOK {
		t.Fatalf("create: HTTP %d", code)
	}
	orders, err := adm.Orders(ctx)
	if err != nil || len(orders) != 1 || orders[0].ExternalID != "ADM-1" {
		t.Fatalf("orders %+v, %v", orders, err)
	}
	st, err := adm.Stats(ctx)
	if err != nil || st.CreatesReceived != 1 || st.OrdersStored != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if life, err := adm.Lifecycle(ctx); err != nil || life.PaidStatus != sb.Lifecycle().PaidStatus {
		t.Fatalf("lifecycle %+v, %v", life, err)
	}
	f, err := adm.Faults(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.PRefuse = 0.5
	if now, err := adm.SetFaults(ctx, f); err != nil || now.PRefuse != 0.5 || sb.Faults().PRefuse != 0.5 {
		t.Fatalf("set faults: %+v, %v", now, err)
	}
	f.Latency = "not a duration"
	if _, err := adm.SetFaults(ctx, f); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("bad faults: %v", err)
	}
	if err := adm.Force(ctx, sandbox.Force{Status: 503, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Force(ctx, sandbox.Force{Status: 42}); err == nil {
		t.Fatal("a bad force was accepted")
	}
	if err := adm.ClearForced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := adm.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if orders, err := adm.Orders(ctx); err != nil || len(orders) != 0 {
		t.Fatalf("after reset: %d orders, %v", len(orders), err)
	}
	if err := (sandbox.Admin{URL: "http://127.0.0.1:1"}).Health(ctx); err == nil {
		t.Fatal("no error from a closed port")
	}
}
