package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/api"
	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
)

// TestCreatesFollowTheDeploymentsRules: a batch created through the API
// is held by the approval rules, counted toward its recipients' velocity
// and scheduled by its release time and pay dates as a file would be;
// the batch's answer names the rule and its approvers.
func TestCreatesFollowTheDeploymentsRules(t *testing.T) {
	rule, err := approval.ParseRule("total >= 30: 2 approver")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *api.Config) {
		c.Load.Approval = loader.Approval{Rules: approval.Set{Rules: []approval.Rule{rule}}}
		c.Load.Velocity = loader.Velocity{Limits: ledger.VelocityLimits{Count: 3}, Action: loader.VelocityHold}
		c.Load.File.PayDateColumn = "Pay date"
	})
	secret, _, err := api.NewTokens(e.rdb).Create(context.Background(), "boss2", access.Approver, "test")
	if err != nil {
		t.Fatal(err)
	}
	e.tokens["boss2"] = secret
	create := func(key string, body map[string]any, status int) api.Batch {
		t.Helper()
		a := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: key, body: body})
		expect(t, a, status, key)
		var b api.Batch
		if status < 300 {
			a.json(t, &b)
		}
		return b
	}

	// The rule: 10.50 + 11.50 + 12.50 = 34.50 >= 30 needs two approvers.
	b := create("rule", map[string]any{"items": items("RULE", 3)}, 201)
	if b.Phase != "awaiting_approval" || !strings.Contains(b.Approval.Rule, "total >= 30: 2 approver") {
		t.Fatalf("a batch over the rule: phase %s, approval %+v", b.Phase, b.Approval)
	}
	expect(t, e.do(req{method: "POST", path: b.Links.Self + "/approve", token: "boss", key: "r-1", body: map[string]string{}}), 200, "first approval")
	var mid api.Batch
	e.do(req{method: "GET", path: b.Links.Self, token: "audit"}).json(t, &mid)
	if mid.Phase != "awaiting_approval" || mid.Approval.Progress != "1 of 2 approvals: token:boss" || len(mid.Approval.Approvers) != 1 {
		t.Fatalf("after one approval: phase %s, approval %+v", mid.Phase, mid.Approval)
	}
	expect(t, e.do(req{method: "POST", path: b.Links.Self + "/approve", token: "boss2", key: "r-2", body: map[string]string{}}), 200, "second approval")
	var done api.Batch
	e.do(req{method: "GET", path: b.Links.Self, token: "audit"}).json(t, &done)
	if done.Totals["queued"].Count != 3 || strings.Join(done.Approval.Approvers, ",") != "token:boss,token:boss2" {
		t.Fatalf("after two approvals: totals %+v, approval %+v", done.Totals, done.Approval)
	}

	// Velocity: the card of the rule's three payouts has had 3 today, the
	// limit: a fourth payout to it is held.
	small := items("VEL", 1)
	small[0]["amount"] = "5.00"
	v := create("velocity", map[string]any{"items": small}, 201)
	if v.Totals["held"].Count != 1 {
		t.Fatalf("a payout over its recipient's velocity: totals %+v", v.Totals)
	}

	// Release: the batch's releaseAt, and an item's own pay date.
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	later := items("REL", 2)
	for _, it := range later {
		it["amount"] = "1.00"
		it["destination"] = map[string]string{"telecomOperator": "MTS"}
	}
	later[1]["info"] = map[string]string{"Pay_Date": time.Now().UTC().AddDate(0, 0, 2).Format("2006-01-02")}
	r := create("release", map[string]any{"releaseAt": tomorrow, "items": later}, 201)
	if r.Totals["scheduled"].Count != 2 {
		t.Fatalf("a batch released tomorrow: totals %+v", r.Totals)
	}
	p2, err := ledger.New(e.rdb).Get(context.Background(), r.ID, "REL-0001")
	if err != nil || p2.ReleaseAt.Format("2006-01-02") != time.Now().UTC().AddDate(0, 0, 2).Format("2006-01-02") {
		t.Fatalf("the item with its own pay date: release %v, %v", p2.ReleaseAt, err)
	}

	// Items that give no pay date at all leave at once (once approved):
	// the pay-date column is not required of them.
	now := items("NOW", 1)
	now[0]["amount"], now[0]["destination"] = "1.00", map[string]string{"telecomOperator": "MTS"}
	if n := create("no-pay-date", map[string]any{"items": now}, 201); n.Totals["queued"].Count != 1 {
		t.Fatalf("items without a pay date: totals %+v", n.Totals)
	}

	// A release in the past is refused with its field; nothing is loaded.
	past := items("PAST", 1)
	past[0]["destination"] = map[string]string{"telecomOperator": "MTS"}
	a := e.do(req{method: "POST", path: "/api/v1/batches", token: "erp", key: "past", body: map[string]any{"releaseAt": "2020-01-01", "items": past}})
	expect(t, a, 422, "a release in the past")
	var prob api.Problem
	a.json(t, &prob)
	if len(prob.Errors) != 1 || prob.Errors[0].Field != "releaseAt" || !strings.Contains(prob.Errors[0].Detail, "in the past") {
		t.Fatalf("a release in the past: %s", a.body)
	}
}
