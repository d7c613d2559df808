package operator

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
	"github.com/redis/go-redis/v9"
)

// Console gives the web UI (ui.Console) the ledger's batches and payouts:
// each page is one call of the read side (package view), whose payouts it
// shows with the batch's decimals and card-like numbers masked; a
// download is a report of package results.
type Console struct {
	Ledger *ledger.Ledger
	// View reads the pages (view.New: with its scan cache).
	View *view.Reader
	// Queue is the Redis of the payout queue, whose pause a batch's phase
	// says (nil: not looked at).
	Queue redis.UniversalClient
}

// NewConsole returns the Console of the ledger in rdb, with the read
// side's scan cache.
func NewConsole(rdb redis.UniversalClient) Console {
	return Console{Ledger: ledger.New(rdb), View: view.New(rdb)}
}

// notFound turns the ledger's ErrNotFound into the UI's.
func notFound(err error) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("%w: %w", ui.ErrNotFound, err)
	}
	return err
}

// Batch is one batch's header.
func (c Console) Batch(ctx context.Context, id string) (ui.BatchDetail, error) {
	s, err := c.View.Header(ctx, id)
	if err != nil {
		return ui.BatchDetail{}, notFound(err)
	}
	paused, err := QueuePaused(ctx, c.Queue)
	if err != nil {
		return ui.BatchDetail{}, err
	}
	v := BatchViews([]view.BatchStatus{s}, paused)[0]
	d := ui.BatchDetail{BatchView: v, Scale: s.Scale, Amounts: map[string]string{}, DecidedBy: s.DecidedBy,
		DecidedAt: s.DecidedAt, Note: s.Note, Reported: s.Reported, InfoColumns: s.InfoColumns}
	for _, st := range lifecycle.States {
		d.Amounts[string(st)] = s.Counts.Amount(st, s.Scale).StringFixed(s.Scale)
	}
	return d, nil
}

// pageOrder is the read side's order of a ui.PayoutQuery's sort.
func pageOrder(sort string) view.Order {
	switch sort {
	case ui.SortAmountAsc:
		return view.AmountAsc
	case ui.SortAmountDesc:
		return view.AmountDesc
	}
	return view.ByLine
}

// Payouts is a page of a batch's payouts (view.Reader.Page).
func (c Console) Payouts(ctx context.Context, id string, q ui.PayoutQuery) (ui.PayoutPage, error) {
	p, err := c.View.Page(ctx, id, view.Query{State: lifecycle.State(q.State), Order: pageOrder(q.Sort), Offset: q.Offset, Limit: q.Limit})
	if err != nil {
		return ui.PayoutPage{}, notFound(err)
	}
	return ui.PayoutPage{Rows: payoutViews(p.Batch, p.Payouts), Total: p.Total}, nil
}

// Payout is one payout and its history.
func (c Console) Payout(ctx context.Context, batch, ext string) (ui.PayoutView, []ui.AuditView, error) {
	h, err := c.View.History(ctx, batch, ext)
	if err != nil {
		return ui.PayoutView{}, nil, notFound(err)
	}
	var hist []ui.AuditView
	for _, a := range h.Audit {
		hist = append(hist, auditView(a))
	}
	return payoutView(h.Batch, h.Payout), hist, nil
}

// auditView shows an audit entry, card-like numbers masked.
func auditView(a ledger.AuditEntry) ui.AuditView {
	v := ui.AuditView{Time: a.Time, Actor: card.Scrub(a.Actor), Role: a.Role, From: a.From, To: a.To, Note: card.Scrub(a.Context["note"])}
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(a.Context)) {
		if k != "note" && k != "op" && a.Context[k] != "" {
			rest = append(rest, k+" "+card.Scrub(a.Context[k]))
		}
	}
	v.Details = strings.Join(rest, ", ")
	return v
}

// Find returns the payouts ext across batches, ext written in any case
// or Unicode form (view.Reader.Find).
func (c Console) Find(ctx context.Context, ext string) ([]ui.PayoutView, error) {
	items, err := c.View.Find(ctx, ext)
	if err != nil {
		return nil, err
	}
	return itemViews(items), nil
}

// Review lists the payouts in needs_review of every batch, newest batch
// first, at most limit (view.Reader.Review).
func (c Console) Review(ctx context.Context, limit int) ([]ui.PayoutView, error) {
	items, err := c.View.Review(ctx, limit)
	if err != nil {
		return nil, err
	}
	return itemViews(items), nil
}

// itemViews shows payouts of several batches.
func itemViews(items []view.Item) []ui.PayoutView {
	out := make([]ui.PayoutView, 0, len(items))
	for _, it := range items {
		out = append(out, payoutView(it.Batch, it.Payout))
	}
	return out
}

// Download writes a batch's file kind.
func (c Console) Download(ctx context.Context, batch, kind string, w io.Writer) error {
	b, err := c.Ledger.Batch(ctx, batch)
	if err != nil {
		return notFound(err)
	}
	switch kind {
	case ui.DownloadResult:
		_, err = results.WriteCSV(ctx, c.Ledger, batch, w)
		return err
	case ui.DownloadResultEU:
		_, err = results.WriteWith(ctx, c.Ledger, batch, report.CSV, w, report.CSVOptions{ExcelEU: true})
		return err
	case ui.DownloadXLSX:
		_, err = results.WriteXLSX(ctx, c.Ledger, batch, w)
		return err
	case ui.DownloadSummary:
		_, err = results.WriteSummary(ctx, c.Ledger, batch, w)
		return err
	case ui.DownloadFailed:
		_, err = report.WriteCSV(w, results.Batch(b), failedRows(results.Rows(ctx, c.Ledger, batch)))
		return err
	case ui.DownloadAudit:
		return c.writeAudit(ctx, batch, w)
	}
	return fmt.Errorf("download %q: %w", kind, ui.ErrNotFound)
}

// failedRows keeps the rows that will not be paid as they stand (failed,
// rejected).
func failedRows(rows iter.Seq2[report.Row, error]) iter.Seq2[report.Row, error] {
	return func(yield func(report.Row, error) bool) {
		for r, err := range rows {
			if err == nil && r.State != string(lifecycle.Failed) && r.State != string(lifecycle.Rejected) {
				continue
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// writeAudit writes the batch's audit trail as CSV, card-like numbers
// masked and every cell neutralised for spreadsheets.
func (c Console) writeAudit(ctx context.Context, batch string, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"time", "actor", "externalId", "from", "to", "note", "details", "role"}); err != nil {
		return err
	}
	err := c.Ledger.Audit().Each(ctx, batch, "", func(a ledger.AuditEntry) error {
		v := auditView(a)
		return cw.Write([]string{v.Time.UTC().Format(time.RFC3339Nano), report.Neutralize(v.Actor),
			report.Neutralize(card.Scrub(a.ExternalID)), v.From, v.To, report.Neutralize(v.Note), report.Neutralize(v.Details), v.Role})
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// payoutViews shows payouts of batch b.
func payoutViews(b ledger.Batch, ps []ledger.Payout) []ui.PayoutView {
	out := make([]ui.PayoutView, len(ps))
	for i, p := range ps {
		out[i] = payoutView(b, p)
	}
	return out
}

// payoutView shows one payout: its amount with the batch's decimals, card-like
// numbers masked, and its latest task.
func payoutView(b ledger.Batch, p ledger.Payout) ui.PayoutView {
	amount := p.Amount
	if a, err := money.Parse(p.Amount, 18); err == nil {
		amount = a.StringFixed(b.Scale)
	}
	return ui.PayoutView{
		Batch: b.ID, File: b.File, Line: p.Line, ExternalID: card.Scrub(p.ExternalID), Amount: amount,
		Destination: card.Scrub(p.Destination), State: string(p.State), Awaiting: p.Awaiting,
		OrderID: card.Scrub(p.OrderID), PSPStatus: card.Scrub(p.PSPStatus), Reason: card.Scrub(p.Error),
		Attempts: p.Creates, ResolvedBy: card.Scrub(p.ResolvedBy), Resolution: card.Scrub(p.ResolutionNote),
		ResolvedAt: p.ResolvedAt, UpdatedAt: p.UpdatedAt, Task: latestTask(b, p), Queue: jobs.Queue,
		Info: infoValues(b, p), Extra: extraValues(p.Extra), DestinationType: destinationType(p.Destination),
		Proposal: ProposalWords(p.Proposal), ReleaseAt: p.ReleaseAt,
	}
}

// infoValues is the payout's values of the batch's informational columns,
// one per column, card-like numbers masked; nil when the batch has none.
func infoValues(b ledger.Batch, p ledger.Payout) []ui.InfoValue {
	if len(b.InfoColumns) == 0 {
		return nil
	}
	vals := ledger.UnpackInfo(p.Info)
	out := make([]ui.InfoValue, len(b.InfoColumns))
	for i, col := range b.InfoColumns {
		out[i].Column = col
		if i < len(vals) {
			out[i].Value = card.Scrub(vals[i])
		}
	}
	return out
}

// extraValues is a payout's further destination properties (the JSON
// the loader stored), card-like numbers masked; nil when none or
// unreadable.
func extraValues(extra string) []ui.InfoValue {
	if extra == "" {
		return nil
	}
	var props []psp.Property
	if json.Unmarshal([]byte(extra), &props) != nil {
		return nil
	}
	out := make([]ui.InfoValue, 0, len(props))
	for _, p := range props {
		out = append(out, ui.InfoValue{Column: card.Scrub(p.Key), Value: card.Scrub(p.Value)})
	}
	return out
}

// destinationType is the kind of a stored destination ("card 411111...",
// "telecom MTS"): its first word.
func destinationType(dest string) string {
	kind, _, _ := strings.Cut(strings.TrimSpace(dest), " ")
	return kind
}

// totalsPage is how many payouts DestinationTotals reads at a time.
const totalsPage = 1000

// DestinationTotals counts and sums a batch's payouts per destination
// type, in the order the types first appear in the file; exact decimals.
func (c Console) DestinationTotals(ctx context.Context, batch string) ([]ui.TypeTotal, error) {
	type acc struct {
		n   int
		sum money.Amount
	}
	sums := map[string]*acc{}
	var order []string
	b, err := c.View.EachPage(ctx, batch, totalsPage, func(ps []ledger.Payout) error {
		for _, p := range ps {
			a, err := money.Parse(p.Amount, 18)
			if err != nil {
				return fmt.Errorf("payout %s amount %q: %w", card.Scrub(p.ExternalID), p.Amount, err)
			}
			t := destinationType(p.Destination)
			if sums[t] == nil {
				sums[t] = &acc{}
				order = append(order, t)
			}
			sums[t].n++
			sums[t].sum = sums[t].sum.Add(a)
		}
		return nil
	})
	if err != nil {
		return nil, notFound(err)
	}
	out := make([]ui.TypeTotal, 0, len(order))
	for _, t := range order {
		out = append(out, ui.TypeTotal{Type: t, N: sums[t].n, Amount: sums[t].sum.StringFixed(b.Scale)})
	}
	return out, nil
}

// latestTask is the id of the payout's latest task: its outcome check
// while awaiting the outcome, its status check once it was checked, its
// create otherwise ("" when there is none: a batch not let go yet).
func latestTask(b ledger.Batch, p ledger.Payout) string {
	if p.Creates == 0 && p.Seq == 0 && b.Phase != lifecycle.PhaseLoaded {
		return ""
	}
	if s, ok := queue.NextStep(p); ok {
		return s.ID() // the task that is due for it (queue.NextStep)
	}
	// Done, or waiting for a person: the last task it had.
	switch {
	case p.Awaiting && p.OutcomeSeq > 0:
		return jobs.OutcomeTaskID(p.ExternalID, p.OutcomeSeq)
	case p.Seq > 0:
		return jobs.StatusTaskID(p.ExternalID, p.Seq)
	case p.Creates > 0:
		return jobs.CreateTaskID(p.ExternalID, p.Creates)
	}
	return ""
}
