// Package view is the read side of the ledger, the one owner of what the
// console shows: a page of a batch's payouts by line, by state or by
// amount, the search of an externalId across batches, the work queue of
// payouts that need a person, a payout's history, and the batches with
// their figures, each one call.
//
// It reads Redis directly, through the key builders of package keys and
// the parsers of package ledger (PayoutFromFields, BatchFromFields,
// CountsFromFields), and writes nothing (but the ledger's LineIndex, which
// moves a batch's line index of before the chunks into them). A page in
// file order costs the page: the line index is chunked by line; a page in
// one state comes from the index per state the transitions keep, while it
// is complete; a filter or an amount order the index cannot give comes
// from a brief scan of the batch, which a Reader made by New keeps while
// the batch's counts per state stay the same (at most 30 seconds), so the
// next pages, filters and orders of a batch cost their page only. The
// payouts shown are always read afresh.
package view

import (
	"context"
	"errors"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// Reader reads pages of the ledger. Made by New, it keeps the latest scan
// of each batch; the zero Reader is not usable.
type Reader struct {
	rdb   redis.UniversalClient
	l     *ledger.Ledger
	cache *briefCache
}

// New returns the Reader of the ledger in rdb, with its scan cache.
func New(rdb redis.UniversalClient) *Reader {
	return &Reader{rdb: rdb, l: ledger.New(rdb), cache: &briefCache{m: map[string]briefEntry{}}}
}

// uncached returns a Reader that scans a batch for every page (tests).
func uncached(rdb redis.UniversalClient) *Reader {
	return &Reader{rdb: rdb, l: ledger.New(rdb)}
}

// Order is the order of a page.
type Order int

// The orders of a page.
const (
	ByLine     Order = iota // file line order
	AmountAsc               // smallest amount first, then by line
	AmountDesc              // largest amount first, then by line
)

// Query asks for a page of a batch's payouts.
type Query struct {
	State  lifecycle.State // only the payouts in State; "": every one
	Order  Order
	Offset int
	Limit  int
}

// Page is one page of a batch's payouts.
type Page struct {
	Batch   ledger.Batch
	Payouts []ledger.Payout
	Total   int // payouts of the batch that match the query
}

// Item is a payout with its batch, in a list across batches.
type Item struct {
	Batch  ledger.Batch
	Payout ledger.Payout
}

// Page is the page q of batch id (ledger.ErrNotFound when there is no
// such batch): in file order from the line index (the page's work only),
// in one state from the index per state when it can give it, else
// filtered or sorted from a brief scan of the batch.
func (r *Reader) Page(ctx context.Context, id string, q Query) (Page, error) {
	b, err := r.l.Batch(ctx, id)
	if err != nil {
		return Page{}, err
	}
	if q.State == "" && q.Order == ByLine {
		ps, total, err := r.pageByLine(ctx, id, q.Offset, q.Limit)
		return Page{Batch: b, Payouts: ps, Total: total}, err
	}
	if q.State != "" {
		page, ok, err := r.indexedPage(ctx, b, q)
		if err != nil || ok {
			return page, err
		}
	}
	all, err := r.cachedBriefs(ctx, id, q.Order)
	if err != nil {
		return Page{}, err
	}
	briefs := all
	if q.State != "" {
		briefs = make([]brief, 0, len(all))
		for _, p := range all {
			if p.State == q.State {
				briefs = append(briefs, p)
			}
		}
	}
	ps, err := r.payouts(ctx, id, pageIDs(briefs, q))
	return Page{Batch: b, Payouts: ps, Total: len(briefs)}, err
}

// pageIDs are the externalIds of the page q of briefs.
func pageIDs(briefs []brief, q Query) []string {
	lo := min(max(q.Offset, 0), len(briefs))
	hi := min(lo+q.Limit, len(briefs))
	ids := make([]string, 0, hi-lo)
	for _, p := range briefs[lo:hi] {
		ids = append(ids, p.ExternalID)
	}
	return ids
}

// indexedPage is the page q of batch b's payouts in state q.State from
// the index per state: at the cost of the page in file order, of the
// state's payouts in an amount order. ok is false when the index cannot
// give it (not complete for the batch, or too many payouts in the state
// for an amount order): the caller scans.
func (r *Reader) indexedPage(ctx context.Context, b ledger.Batch, q Query) (Page, bool, error) {
	if q.Order == ByLine {
		ps, total, ok, err := r.pageInState(ctx, b.ID, q.State, q.Offset, q.Limit)
		if err != nil || !ok {
			return Page{}, false, err
		}
		return Page{Batch: b, Payouts: ps, Total: total}, true, nil
	}
	bs, ok, err := r.briefsInIndex(ctx, b.ID, q.State)
	if err != nil || !ok {
		return Page{}, false, err
	}
	bs = sortedBriefs(bs, q.Order)
	ps, err := r.payouts(ctx, b.ID, pageIDs(bs, q))
	if err != nil {
		return Page{}, false, err
	}
	return Page{Batch: b, Payouts: ps, Total: len(bs)}, true, nil
}

// Header is batch id's metadata and counts per state (ledger.ErrNotFound
// when there is none); Interrupted is not read.
func (r *Reader) Header(ctx context.Context, id string) (BatchStatus, error) {
	b, err := r.l.Batch(ctx, id)
	if err != nil {
		return BatchStatus{}, err
	}
	counts, err := r.Counts(ctx, id)
	if err != nil {
		return BatchStatus{}, err
	}
	return BatchStatus{Batch: b, Counts: counts}, nil
}

// History is a payout with its batch and its audit trail, oldest first.
type History struct {
	Item
	Audit []ledger.AuditEntry
}

// History is payout ext of batch with its audit trail
// (ledger.ErrNotFound when either is missing).
func (r *Reader) History(ctx context.Context, batch, ext string) (History, error) {
	b, err := r.l.Batch(ctx, batch)
	if err != nil {
		return History{}, err
	}
	p, err := r.l.Get(ctx, batch, ext)
	if err != nil {
		return History{}, err
	}
	h := History{Item: Item{Batch: b, Payout: p}}
	err = r.l.Audit().Each(ctx, batch, ext, func(a ledger.AuditEntry) error {
		h.Audit = append(h.Audit, a)
		return nil
	})
	return h, err
}

// Find returns the payouts ext across batches, newest batch first, ext
// written in any case or Unicode form (ids are one ignoring them:
// package extid).
func (r *Reader) Find(ctx context.Context, ext string) ([]Item, error) {
	ps, err := r.findPayout(ctx, ext)
	if err == nil && len(ps) == 0 {
		ps, err = r.findSpelledOtherwise(ctx, ext)
	}
	if err != nil {
		return nil, err
	}
	return r.items(ctx, ps)
}

// findSpelledOtherwise finds the payout of ext as its file wrote it (PO-7
// for po-7): the id's claim names its batch, whose payouts are read for
// the spelling with the same extid.Key.
func (r *Reader) findSpelledOtherwise(ctx context.Context, ext string) ([]ledger.Payout, error) {
	owners, err := r.l.Claims().Owners(ctx, "", []string{ext})
	if err != nil {
		return nil, err
	}
	batch, ok := owners[ext]
	if !ok {
		return nil, nil
	}
	bs, err := r.cachedBriefs(ctx, batch, ByLine)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil // archived: not in Redis
	}
	if err != nil {
		return nil, err
	}
	key := extid.Key(ext)
	for _, br := range bs {
		if br.ExternalID != ext && extid.Key(br.ExternalID) == key {
			return r.findPayout(ctx, br.ExternalID)
		}
	}
	return nil, nil
}

// items gives payouts of several batches their batch.
func (r *Reader) items(ctx context.Context, ps []ledger.Payout) ([]Item, error) {
	batches := map[string]ledger.Batch{}
	out := make([]Item, 0, len(ps))
	for _, p := range ps {
		b, ok := batches[p.Batch]
		if !ok {
			var err error
			if b, err = r.l.Batch(ctx, p.Batch); err != nil {
				return nil, err
			}
			batches[p.Batch] = b
		}
		out = append(out, Item{Batch: b, Payout: p})
	}
	return out, nil
}

// Review is the work queue: the payouts in needs_review of every batch
// that counts some, newest batch first, in file order, at most limit:
// from the index per state when it is complete for the batch, else from a
// scan that stops once it has found what the list still needs; the
// batches after the limit are not read. Then the payouts held over their
// recipient's velocity limit (state held), in the same order.
func (r *Reader) Review(ctx context.Context, limit int) ([]Item, error) {
	out, err := r.review(ctx, limit)
	if err != nil {
		return nil, err
	}
	return r.held(ctx, out, limit)
}

// review is Review's payouts in needs_review.
func (r *Reader) review(ctx context.Context, limit int) ([]Item, error) {
	sts, err := r.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var out []Item
	for _, s := range sts {
		if len(out) >= limit {
			break
		}
		if s.Counts.Rows[lifecycle.NeedsReview] == 0 {
			continue
		}
		ps, _, ok, err := r.pageInState(ctx, s.ID, lifecycle.NeedsReview, 0, limit-len(out))
		if err != nil {
			return nil, err
		}
		if !ok {
			briefs, err := r.reviewBriefs(ctx, s.ID, s.Counts.Rows, limit-len(out))
			if err != nil {
				return nil, err
			}
			if ps, err = r.payouts(ctx, s.ID, pageIDs(briefs, Query{Limit: len(briefs)})); err != nil {
				return nil, err
			}
		}
		for _, p := range ps {
			out = append(out, Item{Batch: s.Batch, Payout: p})
		}
	}
	return out, nil
}

// EachPage calls fn with the payouts of batch id in file line order, size
// at a time (pages of the line index), and returns the batch
// (ledger.ErrNotFound when there is none).
func (r *Reader) EachPage(ctx context.Context, id string, size int, fn func([]ledger.Payout) error) (ledger.Batch, error) {
	b, err := r.l.Batch(ctx, id)
	if err != nil {
		return ledger.Batch{}, err
	}
	for off := 0; ; off += size {
		ps, total, err := r.pageByLine(ctx, id, off, size)
		if err != nil {
			return b, err
		}
		if err := fn(ps); err != nil {
			return b, err
		}
		if len(ps) == 0 || off+len(ps) >= total {
			return b, nil
		}
	}
}

// held appends to out the payouts held over their recipient's velocity
// limit (state held), batch by batch, newest first, up to limit in all.
func (r *Reader) held(ctx context.Context, out []Item, limit int) ([]Item, error) {
	sts, err := r.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sts {
		if len(out) >= limit {
			break
		}
		if s.Counts.Rows[lifecycle.Held] == 0 {
			continue
		}
		ps, _, _, err := r.pageInState(ctx, s.ID, lifecycle.Held, 0, limit-len(out))
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			out = append(out, Item{Batch: s.Batch, Payout: p})
		}
	}
	return out, nil
}
