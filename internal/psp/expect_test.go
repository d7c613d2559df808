package psp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

func TestExpectCheck(t *testing.T) {
	want := psp.Expect{ExternalID: "EXT-1", OrderID: "WD-1", Amount: money.MustParse("10.50")}
	noOrder := psp.Expect{ExternalID: "EXT-1", Amount: money.MustParse("10.50")}
	type reasons = []psp.MismatchReason
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		want    psp.Expect
		outcome psp.Outcome
		reasons reasons
		msg     []string // substrings of Message
	}{
		{"exact", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"10.50"}`, want, psp.Created, nil, nil},
		{"10.5 == 10.50", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"10.5"}`, want, psp.Created, nil, nil},
		{"numeric amount", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":10.500}`, want, psp.Created, nil, nil},
		{"exponent amount", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"1.05e1"}`, want, psp.Created, nil, nil},
		{"no amount given", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1"}`, want, psp.Created, nil, nil},
		{"no externalId given", 200, `{"pspDepositOrderID":"WD-1","amount":"10.50"}`, want, psp.Created, nil, nil},
		{"order id unknown to us", 200, `{"pspDepositOrderID":"WD-9","externalId":"EXT-1","amount":"10.50"}`, noOrder, psp.Created, nil, nil},
		{"nothing expected", 200, `{"pspDepositOrderID":"WD-9","externalId":"X","amount":"1"}`, psp.Expect{}, psp.Created, nil, nil},
		{"other amount", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"10.49"}`, want, psp.Ambiguous,
			reasons{psp.MismatchAmount}, []string{`amount expected 10.50, found "10.49"`}},
		{"amount off by a cent fraction", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"10.501"}`, want, psp.Ambiguous,
			reasons{psp.MismatchAmount}, []string{"10.501"}},
		{"unparsable amount", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"ten"}`, want, psp.Ambiguous,
			reasons{psp.MismatchAmount}, []string{`found "ten"`}},
		{"other externalId", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-2","amount":"10.50"}`, want, psp.Ambiguous,
			reasons{psp.MismatchExternalID}, []string{`externalId expected "EXT-1", found "EXT-2"`}},
		{"other order id", 200, `{"pspDepositOrderID":"WD-2","externalId":"EXT-1","amount":"10.50"}`, want, psp.Ambiguous,
			reasons{psp.MismatchOrderID}, []string{`order id expected "WD-1", found "WD-2"`}},
		{"externalId and amount", 200, `{"pspDepositOrderID":"WD-1","externalId":"EXT-2","amount":"99"}`, want, psp.Ambiguous,
			reasons{psp.MismatchExternalID, psp.MismatchAmount}, []string{`"EXT-2"`, `found "99"`}},
		{"no order id", 200, `{"externalId":"EXT-1","amount":"10.50","status":"Paid"}`, want, psp.Ambiguous,
			reasons{psp.MismatchNoOrderID}, []string{"without a usable order id"}},
		{"empty order id", 200, `{"pspDepositOrderID":"","externalId":"EXT-1"}`, noOrder, psp.Ambiguous,
			reasons{psp.MismatchNoOrderID}, []string{"not proof"}},
		{"card number as externalId", 200, `{"pspDepositOrderID":"WD-1","externalId":"4111111111111111","amount":"10.50"}`, want, psp.Ambiguous,
			reasons{psp.MismatchExternalID}, []string{"externalId expected"}},
		{"404 unchanged", 404, ``, want, psp.NotFound, nil, nil},
		{"500 unchanged", 500, ``, want, psp.Ambiguous, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.want.Check(psp.Classify(psp.OpWithdrawalStatus, tc.status, nil, []byte(tc.body), nil, true))
			if r.Outcome != tc.outcome {
				t.Fatalf("outcome %v (%q), want %v", r.Outcome, r.Message, tc.outcome)
			}
			if tc.reasons == nil {
				if r.Mismatch != nil {
					t.Errorf("mismatch %+v", r.Mismatch)
				}
			} else if r.Mismatch == nil || !slices.Equal(r.Mismatch.Reasons, tc.reasons) {
				t.Errorf("mismatch %+v, want reasons %v", r.Mismatch, tc.reasons)
			}
			for _, m := range tc.msg {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q lacks %q", r.Message, m)
				}
			}
			if r.Outcome != psp.Created && r.Order != (psp.Order{}) {
				t.Errorf("order filled on %v: %+v", r.Outcome, r.Order)
			}
			if m := r.Mismatch; m != nil {
				if m.ExpectedExternalID != tc.want.ExternalID || m.ExpectedOrderID != tc.want.OrderID {
					t.Errorf("expected values not recorded: %+v", m)
				}
				if !tc.want.Amount.IsZero() && m.ExpectedAmount != "10.50" {
					t.Errorf("expected amount %q", m.ExpectedAmount)
				}
			}
			b, _ := json.Marshal(r)
			if strings.Contains(string(b), testCard) {
				t.Errorf("result leaks the card: %s", b)
			}
		})
	}
}

// TestCreateAnswerChecked: a create answered 200 about another order is
// not proof either.
func TestCreateAnswerChecked(t *testing.T) {
	for _, tc := range []struct {
		body    string
		outcome psp.Outcome
		reason  psp.MismatchReason
	}{
		{`{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"10.5"}`, psp.Created, ""},
		{`{"pspDepositOrderID":"WD-1","externalId":"EXT-2","amount":"10.50"}`, psp.Ambiguous, psp.MismatchExternalID},
		{`{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"1.05"}`, psp.Ambiguous, psp.MismatchAmount},
		{`{"externalId":"EXT-1","amount":"10.50"}`, psp.Ambiguous, psp.MismatchNoOrderID},
	} {
		ts := startJSON(t, tc.body)
		c := newClient(t, ts, nil)
		r := c.CreateWithdrawal(context.Background(), withdrawal("EXT-1", "10.50", testCard))
		if r.Outcome != tc.outcome || (tc.reason != "" && !r.Mismatch.Has(tc.reason)) || (tc.reason == "" && r.Mismatch != nil) {
			t.Errorf("%s: %v %+v %q", tc.body, r.Outcome, r.Mismatch, r.Message)
		}
	}
}

// TestCheckWithdrawal runs the expectation against the simulator.
func TestCheckWithdrawal(t *testing.T) {
	_, ts := startSandbox(t, nil)
	c := newClient(t, ts.URL, nil)
	ctx := context.Background()
	created := mustCreate(ctx, t, c, withdrawal("EXT-C", "10.50", testCard))
	id := created.Order.OrderID
	byExt := newClient(t, ts.URL, func(c *psp.Config) { c.StatusIDByExternalID = true })
	for _, tc := range []struct {
		name    string
		c       *psp.Client
		want    psp.Expect
		outcome psp.Outcome
		reason  psp.MismatchReason
	}{
		{"by order id", c, psp.Expect{ExternalID: "EXT-C", OrderID: id, Amount: money.MustParse("10.5")}, psp.Created, ""},
		{"by externalId", c, psp.Expect{ExternalID: "EXT-C", Amount: money.MustParse("10.50")}, psp.Created, ""},
		{"by externalId when configured", byExt, psp.Expect{ExternalID: "EXT-C", OrderID: id, Amount: money.MustParse("10.50")}, psp.Created, ""},
		{"other amount", c, psp.Expect{ExternalID: "EXT-C", OrderID: id, Amount: money.MustParse("10.51")}, psp.Ambiguous, psp.MismatchAmount},
		{"order id of another externalId", c, psp.Expect{ExternalID: "EXT-OTHER", OrderID: id}, psp.Ambiguous, psp.MismatchExternalID},
		{"externalId names another order", byExt, psp.Expect{ExternalID: "EXT-C", OrderID: "WD-not-this"}, psp.Ambiguous, psp.MismatchOrderID},
		{"unknown", c, psp.Expect{ExternalID: "EXT-NONE"}, psp.NotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.CheckWithdrawal(ctx, tc.want)
			if r.Outcome != tc.outcome || r.Op != psp.OpWithdrawalStatus {
				t.Fatalf("%v %s %q", r.Outcome, r.Op, r.Message)
			}
			if (tc.reason == "") != (r.Mismatch == nil) || (tc.reason != "" && !r.Mismatch.Has(tc.reason)) {
				t.Errorf("mismatch %+v, want %q", r.Mismatch, tc.reason)
			}
			if r.Outcome == psp.Created && r.Order.OrderID != id {
				t.Errorf("order %+v", r.Order)
			}
		})
	}
	if r := c.CheckWithdrawal(ctx, psp.Expect{}); r.Outcome != psp.Rejected || r.Sent {
		t.Errorf("empty expectation: %+v", r)
	}
}

// startJSON serves body with status 200 to every request; it returns the
// base URL.
func startJSON(t *testing.T, body string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
