//go:build integration

package psp_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/proof/testenv/nginxtest"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
)

// TestNginxFrontEnd: a payout whose create was ambiguous is checked
// through a real nginx in front of the simulator, and is never created
// twice: an id that passes intake is found (its status path reaches the
// PSP unchanged, however it is spelt), and an id that nginx would route
// elsewhere is refused at intake and, should one reach the client, its
// 404 is no answer instead of absence (issue 38).
func TestNginxFrontEnd(t *testing.T) {
	sb, ts := startSandbox(t, nil)
	u, _ := url.Parse(ts.URL)
	base := nginxtest.Start(t, u.Host)
	c := newClient(t, base, func(cfg *psp.Config) { cfg.Timeout = 10 * time.Second })
	ctx := context.Background()

	// ambiguousCreate creates id through nginx while the simulator stores
	// the order and drops the connection: the worker must now ask.
	ambiguousCreate := func(t *testing.T, id string) {
		t.Helper()
		force(t, sb, sandbox.Force{Fault: sandbox.FaultDrop, Store: true, Op: sandbox.OpWithdrawalCreate})
		if r := c.CreateWithdrawal(ctx, withdrawal(id, "10.50", testCard)); r.Outcome != psp.Ambiguous {
			t.Fatalf("create %q through nginx: %s %q, want ambiguous", id, r.Outcome, r.Message)
		}
		if n := ordersOf(sb, id); n != 1 {
			t.Fatalf("the simulator holds %d orders of %q, want 1", n, id)
		}
	}

	t.Run("ids that pass intake are found through nginx", func(t *testing.T) {
		for _, id := range []string{"PO-1", "PO 2 (x)", "PO:3@a+b=c&d$e,f!'*", "ПВ-2026-4", "...5", "a~b_c.6", "PO\"7<>[]{}|^`"} {
			if why := extid.PathProblem(id); why != "" {
				t.Fatalf("%q is refused at intake: %s", id, why)
			}
			ambiguousCreate(t, id)
			r := c.CheckWithdrawal(ctx, psp.Expect{ExternalID: id, Amount: money.MustParse("10.50")})
			if r.Outcome != psp.Created || r.Order.ExternalID != id {
				t.Errorf("status of %q through nginx: %s %q (order %+v), want created", id, r.Outcome, r.Message, r.Order)
			}
		}
	})

	t.Run("ids nginx rewrites are refused at intake and never absent", func(t *testing.T) {
		for _, tt := range []struct {
			id        string
			rewritten bool // nginx routes the old client's path elsewhere
		}{{"..", true}, {".", true}, {"PO/8", false}, {"%2e%2e", false}, {"PO;9", false}} {
			id := tt.id
			if _, errs := intake(t, id); len(errs) != 1 || !strings.Contains(errs[0], "externalId") {
				t.Errorf("intake of %q: errors %q, want the externalId refused", id, errs)
			}
			ambiguousCreate(t, id)
			// What the client asked before: url.PathEscape leaves the id as
			// it is ("..") or encoded in a way nginx decodes; nginx routes
			// it to another path, whose 404 was taken for absence: a second
			// create, a second payment.
			if st := rawStatus(t, base, url.PathEscape(id)); tt.rewritten && st != http.StatusNotFound {
				t.Fatalf("%q asked the old way through nginx: HTTP %d; the old client was fooled by a 404", id, st)
			}
			for i := 0; i < 2; i++ {
				r := c.CheckWithdrawal(ctx, psp.Expect{ExternalID: id, Amount: money.MustParse("10.50")})
				if r.Outcome == psp.NotFound {
					t.Fatalf("status of %q through nginx: %s %q: taken as absence, the payout would be created again", id, r.Outcome, r.Message)
				}
			}
			if n := ordersOf(sb, id); n != 1 {
				t.Errorf("the simulator holds %d orders of %q, want 1", n, id)
			}
		}
	})
}

func ordersOf(sb *sandbox.Server, id string) int {
	n := 0
	for _, o := range sb.Orders() {
		if o.ExternalID == id {
			n++
		}
	}
	return n
}

// rawStatus asks nginx for the status path with the id as given.
func rawStatus(t *testing.T, base, escaped string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+psp.PathWithdrawalStatus+escaped, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// intake reads a one-row payout file holding id, as load, the spool and
// the web upload do, and returns its error listing.
func intake(t *testing.T, id string) (payfile.Summary, []string) {
	t.Helper()
	in := "externalId,amount,telecomOperator\n\"" + strings.ReplaceAll(id, `"`, `""`) + "\",1,MTS\n"
	var errs []string
	sum, err := payfile.Check(context.Background(), "f.csv", strings.NewReader(in), payfile.Options{}, func(e payfile.Error) {
		errs = append(errs, e.Error())
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum, errs
}
