package api

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/ui"
)

// defaultLimit and maxLimit bound a page.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// notFoundOr turns the console's not-found into a 404 problem.
func notFoundOr(err error, what string) error {
	if errors.Is(err, ui.ErrNotFound) || errors.Is(err, ledger.ErrNotFound) {
		return newProblem(KindNotFound, what+" not found (never loaded, or archived)")
	}
	return err
}

// limitOf reads the limit parameter.
func limitOf(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badRequest("limit %q: want 1 to %d", s, maxLimit)
	}
	return n, nil
}

// cursor encodes a position as an opaque string.
func cursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func uncursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", badRequest("after %q: not a cursor of this API (take the page's next link)", c)
	}
	return string(b), nil
}

// nextLink is the URL of the page after, keeping the other parameters.
func nextLink(r *http.Request, after string) string {
	q := r.URL.Query()
	q.Set("after", cursor(after))
	return r.URL.Path + "?" + q.Encode()
}

// batchFilter is the list's filter.
type batchFilter struct {
	phase         string
	since, before time.Time
	afterAt       time.Time // the cursor: the last batch of the page before
	afterID       string
}

func parseBatchFilter(q url.Values) (batchFilter, error) {
	f := batchFilter{phase: q.Get("phase")}
	for name, t := range map[string]*time.Time{"loadedSince": &f.since, "loadedBefore": &f.before} {
		if s := q.Get(name); s != "" {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return f, badRequest("%s %q: want an RFC 3339 time (2026-12-01T00:00:00Z)", name, s)
			}
			*t = v
		}
	}
	if a := q.Get("after"); a != "" {
		c, err := uncursor(a)
		if err != nil {
			return f, err
		}
		ns, id, ok := strings.Cut(c, " ")
		n, perr := strconv.ParseInt(ns, 10, 64)
		if !ok || perr != nil {
			return f, badRequest("after %q: not a cursor of this API (take the page's next link)", a)
		}
		f.afterAt, f.afterID = time.Unix(0, n), id
	}
	return f, nil
}

// keeps says whether v is on a page of f: it matches, and comes after the
// cursor in the list's order (newest first, then by id).
func (f batchFilter) keeps(v ui.BatchView) bool {
	switch {
	case f.phase != "" && v.PhaseCode != f.phase && v.Phase != f.phase:
		return false
	case !f.since.IsZero() && v.LoadedAt.Before(f.since):
		return false
	case !f.before.IsZero() && !v.LoadedAt.Before(f.before):
		return false
	case f.afterID == "":
		return true
	}
	return v.LoadedAt.Before(f.afterAt) || (v.LoadedAt.Equal(f.afterAt) && v.ID > f.afterID)
}

// listBatches: GET /api/v1/batches.
func (s *Server) listBatches(w http.ResponseWriter, r *http.Request, _ access.Principal) error {
	q := r.URL.Query()
	limit, err := limitOf(q)
	if err != nil {
		return err
	}
	f, err := parseBatchFilter(q)
	if err != nil {
		return err
	}
	all, err := operator.Batches{Ledger: s.cfg.Console.Ledger, Queue: s.cfg.Redis}.Batches(r.Context())
	if err != nil {
		return err
	}
	page := struct {
		Items []Batch `json:"items"`
		Next  string  `json:"next,omitempty"`
	}{Items: []Batch{}}
	for _, v := range all {
		if !f.keeps(v) {
			continue
		}
		if len(page.Items) == limit {
			last := page.Items[limit-1]
			page.Next = nextLink(r, fmt.Sprintf("%d %s", lastAt(all, last.ID).UnixNano(), last.ID))
			break
		}
		page.Items = append(page.Items, batchOfView(v))
	}
	return writeJSON(w, http.StatusOK, page)
}

// lastAt is the exact load time of batch id in all (the JSON's is to
// the second).
func lastAt(all []ui.BatchView, id string) time.Time {
	for _, v := range all {
		if v.ID == id {
			return v.LoadedAt
		}
	}
	return time.Time{}
}

// getBatch: GET /api/v1/batches/{batchId}.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request, _ access.Principal) error {
	id := r.PathValue("batchId")
	d, err := s.cfg.Console.Batch(r.Context(), id)
	if err != nil {
		return notFoundOr(err, "batch "+id)
	}
	return writeJSON(w, http.StatusOK, batchOf(d))
}

// listPayouts: GET /api/v1/batches/{batchId}/payouts. The cursor is the
// offset of the next payout in file order (within the state filtered:
// a payout that changes state between two pages may be skipped or
// repeated, as with any cursor over a changing set; without a filter the
// order is the file's and stable).
func (s *Server) listPayouts(w http.ResponseWriter, r *http.Request, _ access.Principal) error {
	q := r.URL.Query()
	limit, err := limitOf(q)
	if err != nil {
		return err
	}
	offset := 0
	if a := q.Get("after"); a != "" {
		c, err := uncursor(a)
		if err != nil {
			return err
		}
		if offset, err = strconv.Atoi(c); err != nil || offset < 0 {
			return badRequest("after %q: not a cursor of this API (take the page's next link)", a)
		}
	}
	id := r.PathValue("batchId")
	p, err := s.cfg.Console.Payouts(r.Context(), id, ui.PayoutQuery{State: q.Get("state"), Offset: offset, Limit: limit})
	if err != nil {
		return notFoundOr(err, "batch "+id)
	}
	page := struct {
		Items []Payout `json:"items"`
		Total int      `json:"total"`
		Next  string   `json:"next,omitempty"`
	}{Items: make([]Payout, 0, len(p.Rows)), Total: p.Total}
	for _, v := range p.Rows {
		page.Items = append(page.Items, payoutOf(v))
	}
	if end := offset + len(p.Rows); len(p.Rows) > 0 && end < p.Total {
		page.Next = nextLink(r, strconv.Itoa(end))
	}
	return writeJSON(w, http.StatusOK, page)
}

// getPayout: GET /api/v1/payouts/{externalId}, with each one's history.
func (s *Server) getPayout(w http.ResponseWriter, r *http.Request, _ access.Principal) error {
	ext := r.PathValue("externalId")
	found, err := s.cfg.Console.View.Find(r.Context(), ext)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return newProblem(KindNotFound, "no payout "+ext+" in any batch")
	}
	out := struct {
		Items []Payout `json:"items"`
	}{}
	for _, it := range found {
		// The id as stored (ext may be written in another case or form).
		pv, hist, err := s.cfg.Console.Payout(r.Context(), it.Batch.ID, it.Payout.ExternalID)
		if err != nil {
			return notFoundOr(err, "payout "+ext)
		}
		p := payoutOf(pv)
		p.History = historyOf(hist)
		out.Items = append(out.Items, p)
	}
	return writeJSON(w, http.StatusOK, out)
}

// contentTypes of the downloads.
var contentTypes = map[string]string{
	ui.DownloadResult: "text/csv; charset=utf-8", ui.DownloadXLSX: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	ui.DownloadSummary: "text/plain; charset=utf-8", ui.DownloadFailed: "text/csv; charset=utf-8", ui.DownloadAudit: "text/csv; charset=utf-8",
}

// download: GET /api/v1/batches/{batchId}/files/{kind}, streamed.
func (s *Server) download(w http.ResponseWriter, r *http.Request, _ access.Principal) error {
	id, kind := r.PathValue("batchId"), r.PathValue("kind")
	ct, ok := contentTypes[kind]
	if !ok {
		return newProblem(KindNotFound, "no download "+kind+" (result.csv, result.xlsx, summary.txt, failed.csv, audit.csv)")
	}
	b, err := s.cfg.Console.Ledger.Batch(r.Context(), id)
	if err != nil {
		return notFoundOr(err, "batch "+id)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.TrimSuffix(b.File, ".csv")+"."+kind))
	if err := s.cfg.Console.Download(r.Context(), id, kind, w); err != nil {
		// Headers are sent: the client sees a cut body; the log says why.
		s.cfg.Log.Error().Err(err).Str("batch", id).Str("kind", kind).Msg("api: download failed midway")
	}
	return nil
}
