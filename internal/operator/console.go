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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/scrub"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/jobs"
	"github.com/redis/go-redis/v9"
)

// Console gives the web UI (ui.Console) the ledger's batches and payouts:
// pages read at the cost of the page where the order is the file's, a
// brief scan of the batch for a state filter or an amount sort. Made by
// NewConsole, it keeps the latest scan of each batch while the batch's
// counts per state stay the same (at most briefsFor): the next pages,
// filters and orders of a batch then cost their page only. The payouts
// shown are always read afresh.
type Console struct {
	Ledger *ledger.Ledger
	// Queue is the Redis of the payout queue, whose pause a batch's phase
	// says (nil: not looked at).
	Queue redis.UniversalClient
	cache *briefCache
}

// NewConsole returns the Console of l with its scan cache.
func NewConsole(l *ledger.Ledger) Console {
	return Console{Ledger: l, cache: &briefCache{m: map[string]briefEntry{}}}
}

// briefsFor bounds how long a scan of a batch is reused.
const briefsFor = 30 * time.Second

// briefCache holds the latest scan of each batch.
type briefCache struct {
	mu sync.Mutex
	m  map[string]briefEntry
}

type briefEntry struct {
	briefs []ledger.PayoutBrief
	counts map[ledger.State]int64
	at     time.Time
	// sorted holds the scan in an amount order (ui.SortAmountAsc,
	// ui.SortAmountDesc), made on first use.
	sorted map[string][]ledger.PayoutBrief
}

// get returns the entry key while it is fresh and the batch's counts per
// state are those it was taken at; it drops the stale entries meanwhile,
// so that the cache stays small.
func (bc *briefCache) get(key string, counts map[ledger.State]int64) (briefEntry, bool) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	for k, v := range bc.m {
		if time.Since(v.at) >= briefsFor {
			delete(bc.m, k)
		}
	}
	e, ok := bc.m[key]
	return e, ok && maps.Equal(e.counts, counts)
}

// put stores the entry key.
func (bc *briefCache) put(key string, e briefEntry) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.m[key] = e
}

// reviewKey is the cache key of the scan of batch id for its payouts in
// needs_review only (the whole scan's key is id).
func reviewKey(id string) string { return id + "\x00" + string(ledger.NeedsReview) }

// briefs is the scan of batch id in order (ui.SortLine, SortAmountAsc or
// SortAmountDesc): the cached one while the batch's counts per state are
// those it was taken at, a new one otherwise. The caller must not modify
// it.
func (c Console) briefs(ctx context.Context, id, order string) ([]ledger.PayoutBrief, error) {
	if c.cache == nil {
		bs, err := c.Ledger.Briefs(ctx, id)
		return sortedBriefs(bs, order), err
	}
	counts, err := c.Ledger.Counts(ctx, id)
	if err != nil {
		return nil, err
	}
	e, ok := c.cache.get(id, counts.Rows)
	if !ok {
		bs, err := c.Ledger.Briefs(ctx, id)
		if err != nil {
			return nil, err
		}
		e = briefEntry{briefs: bs, counts: counts.Rows, at: time.Now(), sorted: map[string][]ledger.PayoutBrief{}}
	}
	out := e.briefs
	if order == ui.SortAmountAsc || order == ui.SortAmountDesc {
		c.cache.mu.Lock()
		sorted := e.sorted[order]
		c.cache.mu.Unlock()
		if sorted == nil {
			sorted = sortedBriefs(e.briefs, order)
			c.cache.mu.Lock()
			e.sorted[order] = sorted
			c.cache.mu.Unlock()
		}
		out = sorted
	}
	c.cache.put(id, e)
	return out, nil
}

// reviewBriefs is up to limit payouts of batch id in needs_review, in file
// order, from the batch's cached scan when there is one, else from a scan
// that compares the state in Redis (cached when it found them all). counts
// are the batch's counts per state.
func (c Console) reviewBriefs(ctx context.Context, id string, counts map[ledger.State]int64, limit int) ([]ledger.PayoutBrief, error) {
	if c.cache == nil {
		return c.Ledger.BriefsIn(ctx, id, ledger.NeedsReview, limit)
	}
	if e, ok := c.cache.get(id, counts); ok {
		var out []ledger.PayoutBrief
		for _, p := range e.briefs {
			if p.State == ledger.NeedsReview && len(out) < limit {
				out = append(out, p)
			}
		}
		return out, nil
	}
	if e, ok := c.cache.get(reviewKey(id), counts); ok && (len(e.briefs) >= limit || int64(len(e.briefs)) == counts[ledger.NeedsReview]) {
		return e.briefs[:min(limit, len(e.briefs))], nil
	}
	bs, err := c.Ledger.BriefsIn(ctx, id, ledger.NeedsReview, limit)
	if err != nil {
		return nil, err
	}
	c.cache.put(reviewKey(id), briefEntry{briefs: bs, counts: counts, at: time.Now()})
	return bs, nil
}

// sortedBriefs is a copy of bs in an amount order, or bs itself in file
// order.
func sortedBriefs(bs []ledger.PayoutBrief, order string) []ledger.PayoutBrief {
	if order != ui.SortAmountAsc && order != ui.SortAmountDesc {
		return bs
	}
	out := slices.Clone(bs)
	ledger.SortBriefs(out, order == ui.SortAmountDesc)
	return out
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
	b, err := c.Ledger.Batch(ctx, id)
	if err != nil {
		return ui.BatchDetail{}, notFound(err)
	}
	counts, err := c.Ledger.Counts(ctx, id)
	if err != nil {
		return ui.BatchDetail{}, err
	}
	paused, err := QueuePaused(ctx, c.Queue)
	if err != nil {
		return ui.BatchDetail{}, err
	}
	v := BatchViews([]ledger.BatchStatus{{Batch: b, Counts: counts}}, paused)[0]
	d := ui.BatchDetail{BatchView: v, Scale: b.Scale, Amounts: map[string]string{}, DecidedBy: b.DecidedBy,
		DecidedAt: b.DecidedAt, Note: b.Note, Reported: b.Reported, InfoColumns: b.InfoColumns}
	for _, s := range ledger.States {
		d.Amounts[string(s)] = counts.Amount(s, b.Scale).StringFixed(b.Scale)
	}
	return d, nil
}

// Payouts is a page of a batch's payouts: in file order from the line
// index (the page's work only), or filtered by state or sorted by amount
// from a brief scan of the batch.
func (c Console) Payouts(ctx context.Context, id string, q ui.PayoutQuery) (ui.PayoutPage, error) {
	b, err := c.Ledger.Batch(ctx, id)
	if err != nil {
		return ui.PayoutPage{}, notFound(err)
	}
	if q.State == "" && (q.Sort == "" || q.Sort == ui.SortLine) {
		ps, total, err := c.Ledger.PageByLine(ctx, id, q.Offset, q.Limit)
		if err != nil {
			return ui.PayoutPage{}, err
		}
		return ui.PayoutPage{Rows: views(b, ps), Total: total}, nil
	}
	if q.State != "" {
		page, ok, err := c.indexedPage(ctx, b, q)
		if err != nil || ok {
			return page, err
		}
	}
	all, err := c.briefs(ctx, id, q.Sort)
	if err != nil {
		return ui.PayoutPage{}, err
	}
	briefs := all
	if q.State != "" {
		briefs = make([]ledger.PayoutBrief, 0, len(all))
		for _, p := range all {
			if string(p.State) == q.State {
				briefs = append(briefs, p)
			}
		}
	}
	page := ui.PayoutPage{Total: len(briefs)}
	lo := min(max(q.Offset, 0), len(briefs))
	hi := min(lo+q.Limit, len(briefs))
	ids := make([]string, 0, hi-lo)
	for _, p := range briefs[lo:hi] {
		ids = append(ids, p.ExternalID)
	}
	ps, err := c.Ledger.Payouts(ctx, id, ids)
	if err != nil {
		return ui.PayoutPage{}, err
	}
	page.Rows = views(b, ps)
	return page, nil
}

// indexedPage is a page of batch b's payouts in state q.State from the
// ledger's index per state: at the cost of the page in file order, of the
// state's payouts in an amount order. ok is false when the index cannot
// give it (not complete for the batch, or too many payouts in the state
// for an amount order): the caller scans.
func (c Console) indexedPage(ctx context.Context, b ledger.Batch, q ui.PayoutQuery) (ui.PayoutPage, bool, error) {
	st := ledger.State(q.State)
	if q.Sort == "" || q.Sort == ui.SortLine {
		ps, total, ok, err := c.Ledger.PageInState(ctx, b.ID, st, q.Offset, q.Limit)
		if err != nil || !ok {
			return ui.PayoutPage{}, false, err
		}
		return ui.PayoutPage{Rows: views(b, ps), Total: total}, true, nil
	}
	bs, ok, err := c.Ledger.BriefsInIndex(ctx, b.ID, st)
	if err != nil || !ok {
		return ui.PayoutPage{}, false, err
	}
	bs = sortedBriefs(bs, q.Sort)
	lo := min(max(q.Offset, 0), len(bs))
	hi := min(lo+q.Limit, len(bs))
	ids := make([]string, 0, hi-lo)
	for _, p := range bs[lo:hi] {
		ids = append(ids, p.ExternalID)
	}
	ps, err := c.Ledger.Payouts(ctx, b.ID, ids)
	if err != nil {
		return ui.PayoutPage{}, false, err
	}
	return ui.PayoutPage{Rows: views(b, ps), Total: len(bs)}, true, nil
}

// Payout is one payout and its history.
func (c Console) Payout(ctx context.Context, batch, ext string) (ui.PayoutView, []ui.AuditView, error) {
	b, err := c.Ledger.Batch(ctx, batch)
	if err != nil {
		return ui.PayoutView{}, nil, notFound(err)
	}
	p, err := c.Ledger.Get(ctx, batch, ext)
	if err != nil {
		return ui.PayoutView{}, nil, notFound(err)
	}
	var hist []ui.AuditView
	err = c.Ledger.Audit().Each(ctx, batch, ext, func(a ledger.AuditEntry) error {
		hist = append(hist, auditView(a))
		return nil
	})
	return view(b, p), hist, err
}

// auditView shows an audit entry, card-like numbers masked.
func auditView(a ledger.AuditEntry) ui.AuditView {
	v := ui.AuditView{Time: a.Time, Actor: card.Scrub(a.Actor), From: a.From, To: a.To, Note: card.Scrub(a.Context["note"])}
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
// or Unicode form (ids are one ignoring them: package extid).
func (c Console) Find(ctx context.Context, ext string) ([]ui.PayoutView, error) {
	ps, err := c.Ledger.FindPayout(ctx, ext)
	if err == nil && len(ps) == 0 {
		ps, err = c.findSpelledOtherwise(ctx, ext)
	}
	if err != nil {
		return nil, err
	}
	return c.viewsAcross(ctx, ps)
}

// findSpelledOtherwise finds the payout of ext as its file wrote it (PO-7
// for po-7): the id's claim names its batch, whose payouts are read for
// the spelling with the same extid.Key.
func (c Console) findSpelledOtherwise(ctx context.Context, ext string) ([]ledger.Payout, error) {
	owners, err := c.Ledger.Claims().Owners(ctx, "", []string{ext})
	if err != nil {
		return nil, err
	}
	batch, ok := owners[ext]
	if !ok {
		return nil, nil
	}
	bs, err := c.briefs(ctx, batch, "")
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil // archived: not in Redis
	}
	if err != nil {
		return nil, err
	}
	key := extid.Key(ext)
	for _, br := range bs {
		if br.ExternalID != ext && extid.Key(br.ExternalID) == key {
			return c.Ledger.FindPayout(ctx, br.ExternalID)
		}
	}
	return nil, nil
}

// viewsAcross shows payouts of several batches.
func (c Console) viewsAcross(ctx context.Context, ps []ledger.Payout) ([]ui.PayoutView, error) {
	batches := map[string]ledger.Batch{}
	out := make([]ui.PayoutView, 0, len(ps))
	for _, p := range ps {
		b, ok := batches[p.Batch]
		if !ok {
			var err error
			if b, err = c.Ledger.Batch(ctx, p.Batch); err != nil {
				return nil, err
			}
			batches[p.Batch] = b
		}
		out = append(out, view(b, p))
	}
	return out, nil
}

// Review lists the payouts in needs_review of every batch that counts
// some, newest batch first, in file order, at most limit: from the
// ledger's index per state when it is complete for the batch, else from a
// scan that stops once it has found what the list still needs; the
// batches after the limit are not read.
func (c Console) Review(ctx context.Context, limit int) ([]ui.PayoutView, error) {
	sts, err := c.Ledger.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var out []ui.PayoutView
	for _, s := range sts {
		if len(out) >= limit {
			break
		}
		if s.Counts.Rows[ledger.NeedsReview] == 0 {
			continue
		}
		ps, _, ok, err := c.Ledger.PageInState(ctx, s.ID, ledger.NeedsReview, 0, limit-len(out))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, views(s.Batch, ps)...)
			continue
		}
		briefs, err := c.reviewBriefs(ctx, s.ID, s.Counts.Rows, limit-len(out))
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(briefs))
		for i, p := range briefs {
			ids[i] = p.ExternalID
		}
		if ps, err = c.Ledger.Payouts(ctx, s.ID, ids); err != nil {
			return nil, err
		}
		out = append(out, views(s.Batch, ps)...)
	}
	return out, nil
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
			if err == nil && r.State != string(ledger.Failed) && r.State != string(ledger.Rejected) {
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
	if err := cw.Write([]string{"time", "actor", "externalId", "from", "to", "note", "details"}); err != nil {
		return err
	}
	err := c.Ledger.Audit().Each(ctx, batch, "", func(a ledger.AuditEntry) error {
		v := auditView(a)
		return cw.Write([]string{v.Time.UTC().Format(time.RFC3339Nano), report.Neutralize(v.Actor),
			report.Neutralize(card.Scrub(a.ExternalID)), v.From, v.To, report.Neutralize(v.Note), report.Neutralize(v.Details)})
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// views shows payouts of batch b.
func views(b ledger.Batch, ps []ledger.Payout) []ui.PayoutView {
	out := make([]ui.PayoutView, len(ps))
	for i, p := range ps {
		out[i] = view(b, p)
	}
	return out
}

// view shows one payout: its amount with the batch's decimals, card-like
// numbers masked, and its latest task.
func view(b ledger.Batch, p ledger.Payout) ui.PayoutView {
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
		Proposal: proposalText(p.Proposal),
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
	b, err := c.Ledger.Batch(ctx, batch)
	if err != nil {
		return nil, notFound(err)
	}
	type acc struct {
		n   int
		sum money.Amount
	}
	sums := map[string]*acc{}
	var order []string
	for off := 0; ; off += totalsPage {
		ps, total, err := c.Ledger.PageByLine(ctx, batch, off, totalsPage)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			a, err := money.Parse(p.Amount, 18)
			if err != nil {
				return nil, fmt.Errorf("payout %s amount %q: %w", card.Scrub(p.ExternalID), p.Amount, err)
			}
			t := destinationType(p.Destination)
			if sums[t] == nil {
				sums[t] = &acc{}
				order = append(order, t)
			}
			sums[t].n++
			sums[t].sum = sums[t].sum.Add(a)
		}
		if len(ps) == 0 || off+len(ps) >= total {
			break
		}
	}
	out := make([]ui.TypeTotal, 0, len(order))
	for _, t := range order {
		out = append(out, ui.TypeTotal{Type: t, N: sums[t].n, Amount: sums[t].sum.StringFixed(b.Scale)})
	}
	return out, nil
}

// proposalText is a pending four-eyes proposal as the console shows it
// ("" for none).
func proposalText(q *ledger.Proposal) string {
	if q == nil {
		return ""
	}
	what := "mark " + label(q.To)
	if q.To == ledger.Created {
		what += " (PSP order " + card.Scrub(q.OrderID) + ")"
	}
	return fmt.Sprintf("%s, proposed by %s at %s: %s. Four-eyes: a second person carries it out by taking the same decision.",
		what, card.Scrub(q.By), q.At.UTC().Format("2006-01-02 15:04:05Z"), card.Scrub(q.Note))
}

// latestTask is the id of the payout's latest task: its outcome check
// while awaiting the outcome, its status check once it was checked, its
// create otherwise ("" when there is none: a batch not let go yet).
func latestTask(b ledger.Batch, p ledger.Payout) string {
	if p.Creates == 0 && p.Seq == 0 && b.Phase != ledger.PhaseLoaded {
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

// DecidePayout takes a decision on one payout, as payout resolve
// (recheck, created, rejected) and payout cancel do: the same ledger
// calls, and after a recheck the same status check enqueued.
func (u UIControls) DecidePayout(ctx context.Context, batch, ext string, d ui.Decision) (string, error) {
	l := u.Actions.Ledger
	who := ledger.Resolution{By: strings.TrimSpace(d.By), Note: strings.TrimSpace(d.Note)}
	if who.By == "" || who.Note == "" {
		return "", ui.Refuse(errors.New("not done: a decision needs a note saying why"))
	}
	if err := typedDecision(who.Note, d.OrderID, d.PSPStatus); err != nil {
		return "", ui.Refuse(fmt.Errorf("not done: %w", err))
	}
	var (
		r   ledger.Resolved
		err error
	)
	switch d.Action {
	case ui.DecideCancel:
		was, err := l.Cancel(ctx, batch, ext, who.By, who.Note)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return "", ui.Refuse(fmt.Errorf("batch %s has no payout %s", batch, ext))
		case errors.Is(err, ledger.ErrEverSent):
			return "", ui.Refuse(errors.New(card.Scrub(err.Error())))
		case err != nil:
			return "", err
		case was != ledger.Queued:
			return "", ui.Refuse(fmt.Errorf("payout %s is %s, not queued: only a payout not sent yet can be cancelled", ext, strings.ReplaceAll(string(was), "_", " ")))
		}
		u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("by", who.By).Msg("payout cancelled by an operator")
		return fmt.Sprintf("payout %s cancelled by %s: %s", card.Scrub(ext), who.By, card.Scrub(who.Note)), nil
	case ui.DecideRecheck:
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: ledger.Checking, Who: who, FourEyes: u.FourEyes})
	case ui.DecideCreated:
		if strings.TrimSpace(d.OrderID) == "" {
			return "", ui.Refuse(errors.New("not done: marking a payout created needs the PSP's order id"))
		}
		who.OutcomeWindow = u.OutcomeWindow
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: ledger.Created, OrderID: strings.TrimSpace(d.OrderID), Who: who, FourEyes: u.FourEyes})
	case ui.DecideRejected:
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: ledger.Rejected, Who: who, FourEyes: u.FourEyes})
	default:
		return "", ui.Refuse(fmt.Errorf("unknown decision %q", d.Action))
	}
	if err := resolveRefusal(batch, ext, err); err != nil {
		return "", err
	}
	p := r.Payout
	if r.Proposed && p.Proposal != nil {
		u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("proposed", string(p.Proposal.To)).
			Str("by", who.By).Msg("payout resolution proposed, awaiting a second person (four-eyes)")
		return fmt.Sprintf("payout %s: %s; nothing changed yet", card.Scrub(ext), proposalText(p.Proposal)), nil
	}
	u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("from", string(r.From)).Str("to", string(r.To)).
		Str("by", who.By).Str("proposed_by", r.ProposedBy).Msg("payout resolved by an operator")
	msg := fmt.Sprintf("payout %s: %s -> %s by %s: %s", card.Scrub(ext), label(r.From), label(r.To), who.By, card.Scrub(p.ResolutionNote))
	if r.ProposedBy != "" {
		msg += " (proposed by " + card.Scrub(r.ProposedBy) + ": four-eyes)"
	}
	if r.To == ledger.Created {
		msg += " (PSP order " + card.Scrub(p.OrderID) + ", PSP status " + card.Scrub(p.PSPStatus) + ")"
	}
	switch {
	case errors.Is(err, ErrNextNotEnqueued):
		// The ledger has the decision; only the reminder is missing: the
		// workers' sweep enqueues it.
		return msg + "; its next check is left to the workers' reconciler", ui.PartlyDone(err)
	case r.To == ledger.Checking:
		return msg + "; status check " + strconv.Itoa(r.Seq) + " enqueued", nil
	case r.Awaiting:
		return msg + "; outcome check " + strconv.Itoa(r.Payout.OutcomeSeq) + " enqueued: the workers follow the order to paid or failed", nil
	}
	return msg, nil
}

// resolveRefusal is what the console says of a resolution's error: a
// refusal shown to the operator, a fault, or nil (done; the next check
// may not be enqueued).
func resolveRefusal(batch, ext string, err error) error {
	var (
		conflict *ledger.ConflictError
		refused  *VerifyError
	)
	switch {
	case err == nil || errors.Is(err, ErrNextNotEnqueued):
		return nil
	case errors.As(err, &conflict):
		return ui.Refuse(fmt.Errorf("payout %s is %s, not needs review: nothing changed (only a payout that needs review can be resolved)",
			card.Scrub(ext), strings.ReplaceAll(string(conflict.Found), "_", " ")))
	case errors.As(err, &refused), errors.Is(err, ErrNoPSP), errors.Is(err, ledger.ErrFourEyes):
		return ui.Refuse(fmt.Errorf("not done: %w", err))
	case errors.Is(err, ledger.ErrNotFound):
		return ui.Refuse(fmt.Errorf("batch %s has no payout %s", batch, card.Scrub(ext)))
	case errors.Is(err, ledger.ErrBadResolution):
		return ui.Refuse(errors.New("not done: a decision needs the signed-in person and a note"))
	}
	return err
}

func label(s ledger.State) string { return strings.ReplaceAll(string(s), "_", " ") }

// typedDecision checks what a person typed into a decision form as the
// ledger will (internal/scrub): a note of at most scrub.MaxNote characters,
// an order id and a PSP status, none with a control character; the ledger
// stores them scrubbed.
func typedDecision(note, orderID, pspStatus string) error {
	if _, err := scrub.Note(note); err != nil {
		return err
	}
	if _, err := scrub.Field("PSP order id", orderID, scrub.MaxField); err != nil {
		return err
	}
	_, err := scrub.Field("PSP status", pspStatus, scrub.MaxField)
	return err
}
