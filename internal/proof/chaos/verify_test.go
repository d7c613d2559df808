package chaos

import (
	"reflect"
	"strings"
	"testing"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
)

const (
	cardA = "4111111111111111"
	cardB = "5555555555554444"
)

func row(ext, amount, cardNo, telecom string, magic Magic) Row {
	return Row{File: "f.csv", ExternalID: ext, Amount: money.MustParse(amount), AmountText: amount,
		Card: cardNo, CardText: cardNo, Telecom: telecom, Magic: magic}
}

func payout(ext, amount string, st lifecycle.State, order string, seq int) ledger.Payout {
	return ledger.Payout{ExternalID: ext, Amount: amount, State: st, OrderID: order, Seq: seq}
}

func order(ext, id, amount, key, value string) sandbox.Order {
	return sandbox.Order{Kind: "withdrawal", ExternalID: ext, PSPOrderID: id, Amount: amount,
		Properties: []sandbox.Property{{Key: key, Value: value}}}
}

// cleanBooks are the books of a run that kept every promise: a card payout
// created after an ambiguous answer, a telecom payout, a declined card.
func cleanBooks() Books {
	return Books{
		Rows: []Row{
			row("A", "10.50", cardA, "", NotMagic),
			row("B", "7", "", "MTS", NotMagic),
			row("C", "1.00", sandbox.DeclinedCard, "", MagicDeclined),
		},
		Payouts: map[string]ledger.Payout{
			"A": payout("A", "10.5", lifecycle.Created, "WD-1", 2),
			"B": payout("B", "7", lifecycle.Created, "WD-2", 0),
			"C": payout("C", "1", lifecycle.Rejected, "", 0),
		},
		Orders: []sandbox.Order{
			order("A", "WD-1", "10.50", "cardNumber", card.Mask(cardA)),
			order("B", "WD-2", "7", "telecomOperator", "MTS"),
		},
		Files: []FileCheck{{File: "f.csv", Batch: "b1", Final: true, Reconciled: true, ResultFile: true}},
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Books)
		want    Verdict // counts only
		finding string  // a substring of some finding
	}{
		{name: "clean", change: func(*Books) {}},
		{name: "second order for a created payout", change: func(b *Books) {
			b.Orders = append(b.Orders, order("A", "WD-9", "10.50", "cardNumber", card.Mask(cardA)))
		}, want: Verdict{Duplicates: 1}, finding: "A has 2 orders"},
		{name: "order for a rejected payout", change: func(b *Books) {
			b.Orders = append(b.Orders, order("C", "WD-9", "1.00", "cardNumber", card.Mask(sandbox.DeclinedCard)))
		}, want: Verdict{Duplicates: 1}, finding: "C is rejected but has 1 order"},
		{name: "order for a payout needing review", change: func(b *Books) {
			b.Payouts["C"] = payout("C", "1", lifecycle.NeedsReview, "", 3)
			b.Orders = append(b.Orders, order("C", "WD-9", "1.00", "cardNumber", card.Mask(sandbox.DeclinedCard)))
		}, want: Verdict{Rejected: -1, NeedsReview: 1, Ambiguous: 1, Duplicates: 1}, finding: "needs_review but has 1 order"},
		{name: "order for an unknown externalId", change: func(b *Books) {
			b.Orders = append(b.Orders, order("Z", "WD-9", "1.00", "telecomOperator", "MTS"))
		}, want: Verdict{Duplicates: 1}, finding: "no row has: Z"},
		{name: "row missing from the ledger", change: func(b *Books) {
			delete(b.Payouts, "B")
		}, want: Verdict{Created: -1, Lost: 1, Duplicates: 1}, finding: "B (f.csv) is not in the ledger"},
		{name: "payout still checking", change: func(b *Books) {
			b.Payouts["B"] = payout("B", "7", lifecycle.Checking, "", 1)
			b.Orders = b.Orders[:1]
		}, want: Verdict{Created: -1, Ambiguous: 1, Lost: 1}, finding: "B is still checking"},
		{name: "created without an order", change: func(b *Books) {
			b.Orders = b.Orders[1:]
		}, want: Verdict{Lost: 1}, finding: "the PSP has no order"},
		{name: "wrong amount at the PSP", change: func(b *Books) {
			b.Orders[0].Amount = "10.05"
		}, want: Verdict{Mismatches: 1}, finding: `amount "10.05"`},
		{name: "wrong card at the PSP", change: func(b *Books) {
			b.Orders[0].Properties[0].Value = card.Mask(cardB)
		}, want: Verdict{Mismatches: 1}, finding: "cardNumber"},
		{name: "wrong telecom operator at the PSP", change: func(b *Books) {
			b.Orders[1].Properties = []sandbox.Property{{Key: "telecomOperator", Value: "Beeline"}}
		}, want: Verdict{Mismatches: 1}, finding: `"Beeline"`},
		{name: "ledger order id not at the PSP", change: func(b *Books) {
			b.Payouts["A"] = payout("A", "10.5", lifecycle.Created, "WD-7", 2)
		}, want: Verdict{Mismatches: 1}, finding: "ledger order WD-7"},
		{name: "ledger amount differs from the file", change: func(b *Books) {
			b.Payouts["B"] = payout("B", "7.01", lifecycle.Created, "WD-2", 0)
		}, want: Verdict{Mismatches: 1}, finding: `ledger amount "7.01"`},
		{name: "ordinary row rejected", change: func(b *Books) {
			b.Payouts["B"] = payout("B", "7", lifecycle.Rejected, "", 0)
			b.Orders = b.Orders[:1]
		}, want: Verdict{Created: -1, Rejected: 1, Mismatches: 1}, finding: "ordinary row was rejected"},
		{name: "magic row created", change: func(b *Books) {
			b.Payouts["C"] = payout("C", "1", lifecycle.Created, "WD-3", 0)
			b.Orders = append(b.Orders, order("C", "WD-3", "1.00", "cardNumber", card.Mask(sandbox.DeclinedCard)))
		}, want: Verdict{Created: 1, Rejected: -1, Mismatches: 1}, finding: "declined-card row was created"},
		{name: "report does not reconcile", change: func(b *Books) {
			b.Files[0].Reconciled = false
		}, want: Verdict{Mismatches: 1}, finding: "reconciled=false"},
		{name: "no result file", change: func(b *Books) {
			b.Files[0].ResultFile = false
		}, want: Verdict{Mismatches: 1}, finding: "no result file"},
		{name: "file never loaded", change: func(b *Books) {
			b.Files[0] = FileCheck{File: "f.csv"}
		}, want: Verdict{Mismatches: 1}, finding: "never loaded"},
		{name: "report unreadable", change: func(b *Books) {
			b.Files[0].Problem = "payout report exited 3"
		}, want: Verdict{Mismatches: 1}, finding: "exited 3"},
	}
	base := Verdict{Created: 2, Rejected: 1, Ambiguous: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cleanBooks()
			tt.change(&b)
			got := Verify(b)
			want := Verdict{
				Created: base.Created + tt.want.Created, Rejected: base.Rejected + tt.want.Rejected,
				NeedsReview: tt.want.NeedsReview, Ambiguous: base.Ambiguous + tt.want.Ambiguous,
				Duplicates: tt.want.Duplicates, Lost: tt.want.Lost, Mismatches: tt.want.Mismatches,
			}
			findings := got.Findings
			got.Findings = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v\nfindings %q", got, want, findings)
			}
			joined := strings.Join(findings, "\n")
			if tt.finding == "" && len(findings) > 0 {
				t.Errorf("clean books gave findings %q", findings)
			}
			if tt.finding != "" && !strings.Contains(joined, tt.finding) {
				t.Errorf("no finding mentions %q: %q", tt.finding, findings)
			}
			if strings.Contains(joined, cardA) || strings.Contains(joined, cardB) {
				t.Errorf("a finding shows a full card number: %q", findings)
			}
		})
	}
}

func TestVerifyBoundsFindings(t *testing.T) {
	var b Books
	b.Payouts = map[string]ledger.Payout{}
	for i := 0; i < 3*maxExamples; i++ {
		b.Rows = append(b.Rows, row("X"+strings.Repeat("x", i), "1", "", "MTS", NotMagic))
	}
	v := Verify(b)
	if v.Lost != 3*maxExamples {
		t.Fatalf("lost %d, want %d", v.Lost, 3*maxExamples)
	}
	if len(v.Findings) != maxExamples+1 || !strings.Contains(v.Findings[maxExamples], "60 in all") {
		t.Errorf("want %d examples and a total, got %d: last %q", maxExamples, len(v.Findings), v.Findings[len(v.Findings)-1])
	}
}

// lifecycleBooks are the books of a run with the order lifecycle: A paid,
// B failed with the sandbox's reason, C declined at creation.
func lifecycleBooks() Books {
	b := cleanBooks()
	a, bb := b.Payouts["A"], b.Payouts["B"]
	a.State, a.PSPStatus = lifecycle.Paid, "Paid"
	bb.State, bb.PSPStatus, bb.Error = lifecycle.Failed, "Failed", "PSP status Failed: card expired"
	b.Payouts["A"], b.Payouts["B"] = a, bb
	b.Orders[0].FinalStatus = "Paid"
	b.Orders[1].FinalStatus, b.Orders[1].FinalReason = "Failed", "card expired"
	b.PaidStatus, b.FailedStatus = "Paid", "Failed"
	return b
}

func TestVerifyOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Books)
		want    Verdict // counts only, beyond the clean books'
		finding string
	}{
		{name: "clean", change: func(*Books) {}},
		{name: "paid, but the PSP failed it", change: func(b *Books) {
			b.Orders[0].FinalStatus, b.Orders[0].FinalReason = "Failed", "account closed"
		}, want: Verdict{OutcomeMismatches: 1}, finding: `A is paid, but its order WD-1 ends "Failed"`},
		{name: "failed, but the PSP paid it", change: func(b *Books) {
			b.Orders[1].FinalStatus, b.Orders[1].FinalReason = "Paid", ""
		}, want: Verdict{OutcomeMismatches: 1}, finding: `B is failed, but its order WD-2 ends "Paid"`},
		{name: "failed with another reason", change: func(b *Books) {
			b.Orders[1].FinalReason = "account closed"
		}, want: Verdict{OutcomeMismatches: 1}, finding: `reason "account closed"`},
		{name: "created is not an outcome once orders settle", change: func(b *Books) {
			p := b.Payouts["A"]
			p.State = lifecycle.Created
			b.Payouts["A"] = p
		}, want: Verdict{Paid: -1, OutcomeMismatches: 1}, finding: "A is created, but"},
		{name: "still awaiting its outcome", change: func(b *Books) {
			p := b.Payouts["A"]
			p.State, p.Awaiting = lifecycle.Created, true
			b.Payouts["A"] = p
		}, want: Verdict{Paid: -1, Lost: 1}, finding: "awaiting the outcome"},
		{name: "the outcome window ran out", change: func(b *Books) {
			p := b.Payouts["A"]
			p.State, p.Error = lifecycle.NeedsReview, "no final status from the PSP within the outcome window"
			b.Payouts["A"] = p
		}, want: Verdict{Created: -1, Paid: -1, NeedsReview: 1, OutcomeMismatches: 1}, finding: "outcome window"},
		{name: "paid without an order", change: func(b *Books) {
			b.Orders = b.Orders[1:]
		}, want: Verdict{Lost: 1}, finding: "A is paid in the ledger (order WD-1) but the PSP has no order"},
		{name: "paid twice", change: func(b *Books) {
			o := order("A", "WD-9", "10.50", "cardNumber", card.Mask(cardA))
			o.FinalStatus = "Paid"
			b.Orders = append(b.Orders, o)
		}, want: Verdict{Duplicates: 1}, finding: "A has 2 orders"},
	}
	base := Verdict{Created: 2, Paid: 1, Failed: 1, Rejected: 1, Ambiguous: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := lifecycleBooks()
			tt.change(&b)
			got := Verify(b)
			want := Verdict{
				Created: base.Created + tt.want.Created, Paid: base.Paid + tt.want.Paid, Failed: base.Failed + tt.want.Failed,
				Rejected: base.Rejected + tt.want.Rejected, NeedsReview: tt.want.NeedsReview, Ambiguous: base.Ambiguous + tt.want.Ambiguous,
				Duplicates: tt.want.Duplicates, Lost: tt.want.Lost, Mismatches: tt.want.Mismatches, OutcomeMismatches: tt.want.OutcomeMismatches,
			}
			findings := got.Findings
			got.Findings = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v\nfindings %q", got, want, findings)
			}
			joined := strings.Join(findings, "\n")
			if tt.finding == "" && len(findings) > 0 {
				t.Errorf("clean books gave findings %q", findings)
			}
			if tt.finding != "" && !strings.Contains(joined, tt.finding) {
				t.Errorf("no finding mentions %q: %q", tt.finding, findings)
			}
		})
	}
}

// controlBooks are cleanBooks with a cancelled payout D and the audit
// trail of every payout.
func controlBooks() Books {
	b := cleanBooks()
	b.Rows = append(b.Rows, row("D", "3", cardB, "", NotMagic))
	b.Payouts["D"] = payout("D", "3", lifecycle.Cancelled, "", 0)
	b.CancelAsked, b.CancelReported, b.CheckAudit = map[string]bool{"D": true}, 1, true
	e := func(ext, from, to string) ledger.AuditEntry {
		return ledger.AuditEntry{ExternalID: ext, From: from, To: to}
	}
	b.Files[0].AuditFile = true
	b.Files[0].Audit = []ledger.AuditEntry{
		{From: "loading", To: "awaiting_approval"}, {From: "awaiting_approval", To: "loaded"},
		e("D", "queued", "cancelled"),
		e("A", "queued", "submitting"), e("B", "queued", "submitting"), e("A", "submitting", "checking"),
		e("C", "queued", "submitting"), e("B", "submitting", "created"), e("A", "checking", "created"),
		e("C", "submitting", "rejected"),
	}
	return b
}

func TestVerifyControls(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Books)
		want    Verdict
		finding string
	}{
		{"clean", func(*Books) {}, Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1}, ""},
		{"cancelled but sent", func(b *Books) {
			b.Orders = append(b.Orders, order("D", "WD-7", "3", "cardNumber", card.Mask(cardB)))
		}, Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, Duplicates: 1}, "D is cancelled but has 1 order"},
		{"cancelled unasked", func(b *Books) { b.CancelAsked = nil }, Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, Mismatches: 1}, "nobody asked"},
		{"count differs", func(b *Books) { b.CancelReported = 2 }, Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, Mismatches: 1}, "payout cancel reported 2"},
		{"no audit file", func(b *Books) { b.Files[0].AuditFile, b.Files[0].Audit = false, nil },
			Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, AuditMismatches: 1}, "no audit file"},
		{"payout without entry", func(b *Books) { b.Files[0].Audit = b.Files[0].Audit[:2] },
			Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, AuditMismatches: 4}, "D (cancelled) has no entry"},
		{"last entry disagrees", func(b *Books) { b.Payouts["B"] = payout("B", "7", lifecycle.Paid, "WD-2", 0) },
			Verdict{Created: 2, Paid: 1, Rejected: 1, Ambiguous: 1, Cancelled: 1, OutcomeMismatches: 1, AuditMismatches: 1}, "B is paid in the ledger, but its last audit entry goes to created"},
		{"transition missing", func(b *Books) {
			b.Files[0].Audit = append(b.Files[0].Audit[:5], b.Files[0].Audit[6:]...) // A submitting -> checking
		}, Verdict{Created: 2, Rejected: 1, Ambiguous: 1, Cancelled: 1, AuditMismatches: 1}, "previous entry ended submitting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := controlBooks()
			tt.change(&b)
			got := Verify(b)
			findings := got.Findings
			got.Findings = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v\nfindings %q", got, tt.want, findings)
			}
			if tt.finding != "" && !strings.Contains(strings.Join(findings, "\n"), tt.finding) {
				t.Errorf("no finding %q in %q", tt.finding, findings)
			}
		})
	}
}
