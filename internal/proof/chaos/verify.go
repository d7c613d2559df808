package chaos

import (
	"fmt"
	"sort"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
)

// Books is what a run ends with, gathered for Verify.
type Books struct {
	Rows    []Row                    // every row generated
	Payouts map[string]ledger.Payout // the ledger, by externalId, all batches
	Orders  []sandbox.Order          // the orders the PSP sandbox stored
	Files   []FileCheck              // one per generated file
	// PaidStatus and FailedStatus are the sandbox's final status words
	// ("" means sandbox.DefaultPaidStatus and DefaultFailedStatus).
	PaidStatus, FailedStatus string
	// CancelAsked are the externalIds the suite asked payout cancel to
	// cancel, CancelReported how many it said it cancelled.
	CancelAsked    map[string]bool
	CancelReported int
	// CheckAudit compares every file's audit trail (FileCheck.Audit) with
	// the ledger.
	CheckAudit bool
}

// FileCheck is what the end of the run learned about one input file.
type FileCheck struct {
	File       string
	Batch      string // the batch loaded from it; "" when none was
	Final      bool   // the batch report says every row is final
	Reconciled bool   // the batch report's sums reconcile to the cent
	ResultFile bool   // the spool outbox holds its result file
	Problem    string // why the report could not be had, if so
	// AuditFile says the outbox holds the batch's NAME.audit.jsonl;
	// Audit is what it lists, AuditProblem why it could not be read.
	AuditFile    bool
	Audit        []ledger.AuditEntry
	AuditProblem string
}

// Verdict is Verify's count of what the books say.
type Verdict struct {
	// Created counts the payouts whose order the PSP created, whatever
	// became of it; Paid and Failed those of them that reached that
	// outcome.
	Created, Paid, Failed, Rejected, NeedsReview, Ambiguous int
	// Cancelled counts the payouts an operator cancelled (final, never
	// sent).
	Cancelled                    int
	Duplicates, Lost, Mismatches int
	// AuditMismatches counts the disagreements of the audit files with
	// the ledger: a batch without its audit file, a payout without an
	// entry, a payout whose last entry's "to" is not its end state, an
	// entry whose "from" is not the payout's previous "to".
	AuditMismatches int
	// OutcomeMismatches counts created payouts whose end state is not
	// what the sandbox's truth (the order's finalStatus) says: paid,
	// failed with the sandbox's reason, or, without a lifecycle, created.
	OutcomeMismatches int
	// Findings explain each count that must be zero, a few examples per
	// kind; they name externalIds and order ids, never a card number.
	Findings []string
}

// maxExamples bounds the findings listed per kind.
const maxExamples = 20

type findings struct {
	seen map[string]int
	list []string
}

func (f *findings) add(kind, format string, args ...any) {
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[kind]++
	if f.seen[kind] <= maxExamples {
		f.list = append(f.list, kind+": "+fmt.Sprintf(format, args...))
	}
}

func (f *findings) result() []string {
	var kinds []string
	for k, n := range f.seen {
		if n > maxExamples {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	out := f.list
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s: ... %d in all", k, f.seen[k]))
	}
	return out
}

// Verify checks the books: exactly one order at the PSP per created
// payout (created, paid or failed), with the row's amount and destination
// and the ledger's order id; the outcome of every created payout is the
// order's final status at the PSP; no order for any other payout; every
// row in the ledger and final; the outcome each row can have; every file's
// report reconciled and its result file written.
func Verify(b Books) Verdict {
	paidWord, failedWord := b.PaidStatus, b.FailedStatus
	if paidWord == "" {
		paidWord = sandbox.DefaultPaidStatus
	}
	if failedWord == "" {
		failedWord = sandbox.DefaultFailedStatus
	}
	var v Verdict
	var f findings
	orders := withdrawals(b.Orders)
	known := map[string]bool{}
	for _, r := range b.Rows {
		known[r.ExternalID] = true
		ords := orders[r.ExternalID]
		p, ok := b.Payouts[r.ExternalID]
		if !ok {
			v.Lost++
			f.add("lost", "%s (%s) is not in the ledger", r.ExternalID, r.File)
			v.Duplicates += len(ords)
			if len(ords) > 0 {
				f.add("duplicate", "%s is not in the ledger but has %d order(s) %s", r.ExternalID, len(ords), orderIDs(ords))
			}
			continue
		}
		v.checkRow(&f, b, r, p, ords, paidWord, failedWord)
	}
	if v.Cancelled != b.CancelReported {
		v.Mismatches++
		f.add("mismatch", "%d payouts are cancelled in the ledger, payout cancel reported %d", v.Cancelled, b.CancelReported)
	}
	v.checkUnknown(&f, orders, known)
	for _, fc := range b.Files {
		v.checkFile(&f, fc, b)
	}
	v.Findings = f.result()
	return v
}

// withdrawals groups the withdrawal orders by externalId.
func withdrawals(all []sandbox.Order) map[string][]sandbox.Order {
	orders := map[string][]sandbox.Order{}
	for _, o := range all {
		if o.Kind != "" && o.Kind != "withdrawal" {
			continue
		}
		orders[o.ExternalID] = append(orders[o.ExternalID], o)
	}
	return orders
}

// checkRow checks the payout p of row r, in the ledger, against the
// orders ords the PSP has for it.
func (v *Verdict) checkRow(f *findings, b Books, r Row, p ledger.Payout, ords []sandbox.Order, paidWord, failedWord string) {
	if p.Seq > 0 {
		v.Ambiguous++
	}
	if a, err := money.Parse(p.Amount, 18); err != nil || a.Cmp(r.Amount) != 0 {
		v.Mismatches++
		f.add("mismatch", "%s: ledger amount %q, file amount %s", r.ExternalID, p.Amount, r.AmountText)
	}
	switch p.State {
	case lifecycle.Created, lifecycle.Paid, lifecycle.Failed:
		v.Created++
		switch p.State {
		case lifecycle.Paid:
			v.Paid++
		case lifecycle.Failed:
			v.Failed++
		}
		if v.checkCreated(f, r, p, ords) {
			v.checkOutcome(f, r, p, ords, paidWord, failedWord)
		}
	case lifecycle.Cancelled:
		v.Cancelled++
		if !b.CancelAsked[r.ExternalID] {
			v.Mismatches++
			f.add("mismatch", "%s is cancelled, but nobody asked for it", r.ExternalID)
		}
		if len(ords) > 0 {
			v.Duplicates += len(ords)
			f.add("duplicate", "%s is cancelled but has %d order(s) at the PSP %s", r.ExternalID, len(ords), orderIDs(ords))
		}
	case lifecycle.NeedsReview:
		if p.OrderID != "" && len(ords) == 1 && ords[0].PSPOrderID == p.OrderID {
			// Created, then no outcome within the outcome window:
			// the order is rightful, the missing outcome is not.
			v.NeedsReview++
			v.OutcomeMismatches++
			f.add("outcome", "%s: order %s ends %q at the PSP but the payout needs review: %s",
				r.ExternalID, p.OrderID, ords[0].FinalStatus, p.Error)
			return
		}
		fallthrough
	case lifecycle.Rejected:
		if p.State == lifecycle.Rejected {
			v.Rejected++
			if r.Magic == NotMagic {
				v.Mismatches++
				f.add("mismatch", "%s: an ordinary row was rejected: %s", r.ExternalID, p.Error)
			}
		} else {
			v.NeedsReview++
		}
		if len(ords) > 0 {
			v.Duplicates += len(ords)
			f.add("duplicate", "%s is %s but has %d order(s) at the PSP %s", r.ExternalID, p.State, len(ords), orderIDs(ords))
		}
	default:
		v.Lost++
		f.add("lost", "%s is still %s", r.ExternalID, p.State)
		if len(ords) > 1 {
			v.Duplicates += len(ords) - 1
			f.add("duplicate", "%s (%s) has %d orders %s", r.ExternalID, p.State, len(ords), orderIDs(ords))
		}
	}
}

// checkUnknown counts the orders for an externalId no row has as
// duplicates.
func (v *Verdict) checkUnknown(f *findings, orders map[string][]sandbox.Order, known map[string]bool) {
	var unknown []string
	for ext := range orders {
		if !known[ext] {
			unknown = append(unknown, ext)
		}
	}
	sort.Strings(unknown)
	for _, ext := range unknown {
		v.Duplicates += len(orders[ext])
		f.add("duplicate", "order(s) %s for an externalId no row has: %s", orderIDs(orders[ext]), ext)
	}
}

// checkFile checks that file fc was loaded, its report is final and
// reconciled, its result file written and (with b.CheckAudit) its audit
// trail right.
func (v *Verdict) checkFile(f *findings, fc FileCheck, b Books) {
	switch {
	case fc.Batch == "":
		v.Mismatches++
		f.add("mismatch", "file %s was never loaded as a batch", fc.File)
		return
	case fc.Problem != "":
		v.Mismatches++
		f.add("mismatch", "file %s (batch %s): %s", fc.File, fc.Batch, fc.Problem)
		return
	}
	if !fc.Final || !fc.Reconciled {
		v.Mismatches++
		f.add("mismatch", "file %s (batch %s): report final=%t reconciled=%t", fc.File, fc.Batch, fc.Final, fc.Reconciled)
	}
	if !fc.ResultFile {
		v.Mismatches++
		f.add("mismatch", "file %s (batch %s): no result file in the outbox", fc.File, fc.Batch)
	}
	if b.CheckAudit {
		v.checkAudit(f, fc, b)
	}
}

// checkAudit compares a file's audit trail with the ledger: every payout
// of the file has an entry, its entries chain (each "from" is the previous
// "to", the first "from" is queued) and the "to" of its last entry is its
// state in the ledger.
func (v *Verdict) checkAudit(f *findings, fc FileCheck, b Books) {
	switch {
	case !fc.AuditFile:
		v.AuditMismatches++
		f.add("audit", "file %s (batch %s): no audit file in the outbox", fc.File, fc.Batch)
		return
	case fc.AuditProblem != "":
		v.AuditMismatches++
		f.add("audit", "file %s (batch %s): %s", fc.File, fc.Batch, fc.AuditProblem)
		return
	}
	last := map[string]string{}
	for _, e := range fc.Audit {
		if e.ExternalID == "" {
			continue // the batch's own entries (held, approved)
		}
		prev, ok := last[e.ExternalID]
		if !ok {
			prev = string(lifecycle.Queued)
		}
		if e.From != prev {
			v.AuditMismatches++
			f.add("audit", "%s: entry %s goes %s -> %s, but the previous entry ended %s", e.ExternalID, e.ID, e.From, e.To, prev)
		}
		last[e.ExternalID] = e.To
	}
	for _, r := range b.Rows {
		if r.File != fc.File {
			continue
		}
		p, ok := b.Payouts[r.ExternalID]
		if !ok {
			continue // lost already
		}
		to, ok := last[r.ExternalID]
		switch {
		case !ok:
			v.AuditMismatches++
			f.add("audit", "%s (%s) has no entry in the audit file of batch %s", r.ExternalID, p.State, fc.Batch)
		case to != string(p.State):
			v.AuditMismatches++
			f.add("audit", "%s is %s in the ledger, but its last audit entry goes to %s", r.ExternalID, p.State, to)
		}
	}
}

// checkOutcome compares the end state of a payout the PSP created with the
// final status of its order (the ledger's order, else the only one).
func (v *Verdict) checkOutcome(f *findings, r Row, p ledger.Payout, ords []sandbox.Order, paidWord, failedWord string) {
	o := ords[0]
	for _, x := range ords {
		if x.PSPOrderID == p.OrderID {
			o = x
		}
	}
	if p.Awaiting {
		v.Lost++
		f.add("lost", "%s is still created, awaiting the outcome of order %s (%q at the PSP)", r.ExternalID, o.PSPOrderID, o.FinalStatus)
		return
	}
	var want lifecycle.State
	switch o.FinalStatus {
	case paidWord:
		want = lifecycle.Paid
	case failedWord:
		want = lifecycle.Failed
	case "", sandbox.StatusCreated:
		want = lifecycle.Created // no lifecycle: created is final
	default:
		v.OutcomeMismatches++
		f.add("outcome", "%s: order %s ends with status %q, neither %q nor %q", r.ExternalID, o.PSPOrderID, o.FinalStatus, paidWord, failedWord)
		return
	}
	if p.State != want {
		v.OutcomeMismatches++
		f.add("outcome", "%s is %s, but its order %s ends %q at the PSP", r.ExternalID, p.State, o.PSPOrderID, o.FinalStatus)
		return
	}
	if want == lifecycle.Failed && (!strings.EqualFold(p.PSPStatus, o.FinalStatus) || !strings.Contains(p.Error, o.FinalReason)) {
		v.OutcomeMismatches++
		f.add("outcome", "%s failed with status %q and reason %q, but its order %s failed %q with reason %q",
			r.ExternalID, p.PSPStatus, p.Error, o.PSPOrderID, o.FinalStatus, o.FinalReason)
	}
	if want == lifecycle.Paid && !strings.EqualFold(p.PSPStatus, o.FinalStatus) {
		v.OutcomeMismatches++
		f.add("outcome", "%s is paid with status %q, but its order %s ends %q", r.ExternalID, p.PSPStatus, o.PSPOrderID, o.FinalStatus)
	}
}

// checkCreated checks the orders of a created payout; it reports whether
// there is an order to compare the outcome with.
func (v *Verdict) checkCreated(f *findings, r Row, p ledger.Payout, ords []sandbox.Order) bool {
	if r.Magic != NotMagic {
		v.Mismatches++
		f.add("mismatch", "%s: a %s row was created", r.ExternalID, r.Magic)
	}
	switch {
	case len(ords) == 0:
		v.Lost++
		f.add("lost", "%s is %s in the ledger (order %s) but the PSP has no order", r.ExternalID, p.State, p.OrderID)
		return false
	case len(ords) > 1:
		v.Duplicates += len(ords) - 1
		f.add("duplicate", "%s has %d orders %s", r.ExternalID, len(ords), orderIDs(ords))
	}
	if p.OrderID != "" && !hasOrder(ords, p.OrderID) {
		v.Mismatches++
		f.add("mismatch", "%s: ledger order %s is not among the PSP's %s", r.ExternalID, p.OrderID, orderIDs(ords))
	}
	key, want := r.MaskedDestination()
	for _, o := range ords {
		if a, err := money.Parse(o.Amount, 18); err != nil || a.Cmp(r.Amount) != 0 {
			v.Mismatches++
			f.add("mismatch", "%s: order %s amount %q, file amount %s", r.ExternalID, o.PSPOrderID, o.Amount, r.AmountText)
		}
		if got := property(o, key); got != want {
			v.Mismatches++
			f.add("mismatch", "%s: order %s %s %q, want %q", r.ExternalID, o.PSPOrderID, key, got, want)
		}
	}
	return true
}

func hasOrder(ords []sandbox.Order, id string) bool {
	for _, o := range ords {
		if o.PSPOrderID == id {
			return true
		}
	}
	return false
}

func property(o sandbox.Order, key string) string {
	for _, p := range o.Properties {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

func orderIDs(ords []sandbox.Order) string {
	ids := make([]string, len(ords))
	for i, o := range ords {
		ids[i] = o.PSPOrderID
	}
	return fmt.Sprint(ids)
}
