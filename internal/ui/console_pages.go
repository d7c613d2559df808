package ui

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/lifecycle"

	"github.com/acme/payout/internal/card"
)

//go:embed templates/console.html.tmpl
var consoleTemplateText string

// pageSize is how many payouts a batch page shows.
const pageSize = 100

// maxReview bounds the work queue's payouts.
const maxReview = 1000

var consoleTemplate = template.Must(template.New("console").Funcs(template.FuncMap{
	"money":  groupDigits,
	"label":  stateLabel,
	"tagCSS": tagCSS,
	"utc":    utcTime,
	"path":   url.PathEscape,
	"add":    func(a, b int) int { return a + b },
	"plain":  plainReason,
	"prop":   propValue,
	"join":   strings.Join,
	"batchRow": func(v PayoutView, extra []string) batchRowItem {
		return batchRowItem{Row: v, Extra: extra}
	},
	"who": actorLabel,
	"reviewRows": func(id string, rows []PayoutView, info []string) reviewRows {
		return reviewRows{ID: id, Rows: rows, Info: info, Extra: extraColumns(rows)}
	},
	"queueItem": func(p queuePage, v PayoutView) resolveItem {
		return resolveItem{Payout: v, CSRF: p.CSRF}
	},
}).Parse(consoleTemplateText))

// extPattern bounds the externalIds accepted in a path or a search: no
// control characters, at most 128 bytes.
var extPattern = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,128}$`)

// consolePage is what every console page carries.
type consolePage struct {
	Nonce, CSRF, User string
	Title             string
	ReadOnly          bool
	// Act: the page may offer decisions (controls, not read-only).
	Act bool
	// Roles: the roles of the signed-in person. Discard: Act, and they
	// may discard; NoDiscard says why not when Act.
	Roles     string
	Discard   bool
	NoDiscard string
	// Decide: Act, and they may decide on payouts (the operator's);
	// NoDecideAll says why not when Act.
	Decide      bool
	NoDecideAll string
	// Refresh, when positive, reloads the page every Refresh seconds
	// (a batch's page while the batch works; never a page with a form
	// to fill).
	Refresh int
}

type batchPage struct {
	consolePage
	Batch     BatchDetail
	States    []stateAmount
	Page      PayoutPage
	Query     PayoutQuery
	PageNo    int
	Pages     int
	From, To  int
	Downloads []string
	Approve   approveOffer
	// Filters: the states one can filter on.
	Filters []string
	// Extra: the further destination properties of the page's rows.
	Extra []string
}

type stateAmount struct {
	State  string
	N      int64
	Amount string
}

// approveOffer says whether the signed-in person is offered Approve for
// a batch awaiting approval, and why not.
type approveOffer struct {
	Awaiting bool
	Allowed  bool
	Why      string
}

type payoutPage struct {
	consolePage
	Payout  PayoutView
	History []AuditView
	// Resolve: it needs review; Cancel: it is still queued or held;
	// Release: it is held over its recipient's velocity limit. NoDecide:
	// why none is offered to the signed-in person (their roles).
	Resolve, Cancel, Release bool
	NoDecide                 string
}

type queuePage struct {
	consolePage
	Review   []PayoutView
	More     bool
	Awaiting []batchRow
	Stuck    []batchRow
	FourEyes bool
}

// batchRowItem is a row of a batch page with the page's extra columns.
type batchRowItem struct {
	Row   PayoutView
	Extra []string
}

// reviewRows is a table of rows on the approval review.
type reviewRows struct {
	ID    string
	Rows  []PayoutView
	Info  []string
	Extra []string
}

// extraColumns is the ordered union of the further destination
// properties (PayoutView.Extra) of rows: the columns their table shows.
func extraColumns(rows []PayoutView) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, v := range r.Extra {
			if !seen[v.Column] {
				seen[v.Column] = true
				out = append(out, v.Column)
			}
		}
	}
	return out
}

// propValue is the value of column col in vals ("" when absent).
func propValue(vals []InfoValue, col string) string {
	for _, v := range vals {
		if v.Column == col {
			return v.Value
		}
	}
	return ""
}

// resolveItem is what the resolve form needs.
type resolveItem struct {
	Payout PayoutView
	CSRF   string
}

type searchPage struct {
	consolePage
	Ext   string
	Found []PayoutView
	// Card: what was typed may hold a card number; it is neither
	// searched nor shown (Ext is empty).
	Card bool
}

// base fills what every console page carries.
func (h *consoleHandlers) base(r *http.Request, title string) consolePage {
	user := userFrom(r.Context())
	p := consolePage{Nonce: nonceFrom(r.Context()), User: user, Title: title, ReadOnly: h.readOnly}
	p.Roles = principalFrom(r.Context()).Roles.String()
	if !h.readOnly && h.controls != nil {
		p.Act, p.CSRF = true, h.csrf.token(r)
		p.NoDiscard = whyNot(r, access.Discard)
		p.Discard = p.NoDiscard == ""
		p.NoDecideAll = whyNot(r, access.Cancel)
		p.Decide = p.NoDecideAll == ""
	}
	return p
}

// renderConsole executes the console template name with data.
func (h *consoleHandlers) renderConsole(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := consoleTemplate.ExecuteTemplate(&buf, name, data); err != nil {
		h.fail(w, r, fmt.Errorf("ui: render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// consoleErr answers a Console error: 404 for ErrNotFound, 503 otherwise.
func (h *consoleHandlers) consoleErr(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h.fail(w, r, err)
}

// pathBatch reads and checks the batch id of the path (400 when bad).
func pathBatch(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !batchIDPattern.MatchString(id) {
		http.Error(w, "bad batch id", http.StatusBadRequest)
		return "", false
	}
	return id, true
}

// queryOf reads a batch page's filter, order and page number.
func queryOf(r *http.Request) (PayoutQuery, int) {
	q := PayoutQuery{Limit: pageSize, Sort: SortLine}
	if s := r.URL.Query().Get("state"); s != "" && knownState(s) {
		q.State = s
	}
	switch s := r.URL.Query().Get("sort"); s {
	case SortAmountAsc, SortAmountDesc:
		q.Sort = s
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	q.Offset = (page - 1) * pageSize
	return q, page
}

// consoleBatch reads the batch the request's path names, for a page of
// the console; ok is false when it answered already (a bad path, no
// console in this UI, a batch not found or the ledger unreachable).
func (h *consoleHandlers) consoleBatch(w http.ResponseWriter, r *http.Request) (string, BatchDetail, bool) {
	id, ok := pathBatch(w, r)
	if !ok {
		return "", BatchDetail{}, false
	}
	if h.console == nil {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return "", BatchDetail{}, false
	}
	b, err := h.console.Batch(r.Context(), id)
	if err != nil {
		h.consoleErr(w, r, err)
		return "", BatchDetail{}, false
	}
	return id, b, true
}

func (h *consoleHandlers) batchPage(w http.ResponseWriter, r *http.Request) {
	id, b, ok := h.consoleBatch(w, r)
	if !ok {
		return
	}
	q, pageNo := queryOf(r)
	pg, err := h.console.Payouts(r.Context(), id, q)
	if err != nil {
		h.consoleErr(w, r, err)
		return
	}
	p := batchPage{consolePage: h.base(r, "Batch "+b.File), Batch: b, Page: pg, Query: q, PageNo: pageNo,
		Pages: max(1, (pg.Total+pageSize-1)/pageSize), Downloads: DownloadKinds, Filters: knownStates}
	p.From, p.To = min(q.Offset+1, pg.Total), min(q.Offset+len(pg.Rows), pg.Total)
	for _, s := range p.Filters {
		if n := b.Counts[s]; n > 0 {
			p.States = append(p.States, stateAmount{State: s, N: n, Amount: b.Amounts[s]})
		}
	}
	p.Approve = h.approveOffer(r, b.BatchView)
	p.Extra = extraColumns(pg.Rows)
	if working(b.BatchView) {
		p.Refresh = refreshWorking
	}
	h.renderConsole(w, r, "batch", p)
}

// approveOffer decides whether the signed-in person may approve b: not
// the person who loaded it under four-eyes or an approval rule, nor a
// person who approved it already (the ledger would refuse both).
func (h *batchHandlers) approveOffer(r *http.Request, b BatchView) approveOffer {
	o := approveOffer{Awaiting: b.Phase == lifecycle.PhaseAwaiting}
	me := userFrom(r.Context())
	switch {
	case !o.Awaiting:
	case h.readOnly || h.controls == nil:
		o.Why = "this UI does not approve (read-only or without controls)"
	case whyNot(r, access.Approve) != "":
		o.Why = whyNot(r, access.Approve)
	case b.ApprovalRule != "" && identity.Same(b.LoadedBy, me):
		o.Why = "you loaded this batch: under its approval rule (" + b.ApprovalRule + ") other people must approve it"
	case (h.fourEyes || b.FourEyes) && identity.Same(b.LoadedBy, me):
		o.Why = "you loaded this batch: under four-eyes another person must approve it"
	case approvedBy(b.Approvers, me):
		o.Why = "you approved this batch already"
		if b.Approvals != "" {
			o.Why += " (" + b.Approvals + ")"
		}
		o.Why += ": another person must approve it"
	default:
		o.Allowed = true
	}
	return o
}

// approvedBy says whether me is one of approvers (identity.Same).
func approvedBy(approvers []string, me string) bool {
	for _, a := range approvers {
		if identity.Same(a, me) {
			return true
		}
	}
	return false
}

func (h *consoleHandlers) payoutPage(w http.ResponseWriter, r *http.Request) {
	id, ok := pathBatch(w, r)
	if !ok {
		return
	}
	ext := r.PathValue("ext")
	if !extPattern.MatchString(ext) {
		http.Error(w, "bad externalId", http.StatusBadRequest)
		return
	}
	if h.console == nil {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return
	}
	pv, hist, err := h.console.Payout(r.Context(), id, ext)
	if err != nil {
		h.consoleErr(w, r, err)
		return
	}
	p := payoutPage{consolePage: h.base(r, "Payout "+pv.ExternalID), Payout: pv, History: hist}
	p.Resolve = pv.State == string(lifecycle.NeedsReview)
	p.Cancel = pv.State == string(lifecycle.Queued) || pv.State == string(lifecycle.Held)
	p.Release = pv.State == string(lifecycle.Held)
	if why := whyNot(r, access.Cancel); p.Act && (p.Resolve || p.Cancel || p.Release) && why != "" {
		// every decision on a payout is the operator's (access.Needs)
		p.Resolve, p.Cancel, p.Release, p.NoDecide = false, false, false, why
	}
	h.renderConsole(w, r, "payout", p)
}

func (h *consoleHandlers) queuePage(w http.ResponseWriter, r *http.Request) {
	if h.console == nil {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return
	}
	review, err := h.console.Review(r.Context(), maxReview+1)
	if err != nil {
		h.consoleErr(w, r, err)
		return
	}
	bs, err := listBatches(r.Context(), h.src)
	if err != nil && !errors.Is(err, errNoBatchSource) {
		h.fail(w, r, err)
		return
	}
	p := queuePage{consolePage: h.base(r, "Work queue"), Review: review, FourEyes: h.fourEyes}
	if len(review) > maxReview {
		p.Review, p.More = review[:maxReview], true
	}
	for i, b := range bs {
		row := batchRow{BatchView: b, Index: i}
		row.Offer = h.approveOffer(r, b)
		switch b.Phase {
		case lifecycle.PhaseAwaiting:
			p.Awaiting = append(p.Awaiting, row)
		case lifecycle.PhaseLoaded, lifecycle.PhaseDiscarded, lifecycle.PhaseLoading, "":
		default: // a phase this UI does not know (an interrupted load...)
			p.Stuck = append(p.Stuck, row)
		}
	}
	h.renderConsole(w, r, "queue", p)
}

func (h *consoleHandlers) searchPage(w http.ResponseWriter, r *http.Request) {
	if h.console == nil {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return
	}
	ext := strings.TrimSpace(r.URL.Query().Get("ext"))
	p := searchPage{consolePage: h.base(r, "Search"), Ext: ext}
	if card.Scrub(ext) != ext {
		// A card number typed (or pasted) into the search box: never
		// echoed in the page, never searched (payfile refuses an
		// externalId that holds one).
		p.Ext, p.Card = "", true
		w.Header().Set("Cache-Control", "no-store")
	}
	if p.Ext != "" {
		if !extPattern.MatchString(ext) {
			http.Error(w, "bad externalId", http.StatusBadRequest)
			return
		}
		found, err := h.console.Find(r.Context(), ext)
		if err != nil {
			h.consoleErr(w, r, err)
			return
		}
		// The batches found may have other informational columns: the
		// results' table has none (each payout's page shows them).
		for i := range found {
			found[i].Info, found[i].Extra = nil, nil
		}
		p.Found = found
	}
	h.renderConsole(w, r, "search", p)
}

func (h *consoleHandlers) download(w http.ResponseWriter, r *http.Request) {
	id, ok := pathBatch(w, r)
	if !ok {
		return
	}
	kind := r.PathValue("kind")
	known := false
	for _, k := range DownloadKinds {
		known = known || k == kind
	}
	if !known || h.console == nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var buf bytes.Buffer
	if err := h.console.Download(r.Context(), id, kind, &buf); err != nil {
		h.consoleErr(w, r, err)
		return
	}
	// The whole file is made before the first byte goes out, so a failure
	// is an error page, never a truncated file. Card numbers are masked
	// by the writers; a last pass masks anything card-like they missed:
	// in the text of a text file, in the text cells of a workbook (its
	// parts are compressed: a pass over its bytes would find nothing and
	// could break the file).
	var body []byte
	ctype := "text/csv; charset=utf-8"
	switch kind {
	case DownloadXLSX:
		ctype = xlsxType
		var err error
		if body, err = scrubXLSX(buf.Bytes()); err != nil {
			h.consoleErr(w, r, fmt.Errorf("download %s of %s: %w", kind, id, err))
			return
		}
	case DownloadSummary:
		ctype = "text/plain; charset=utf-8"
		fallthrough
	default:
		body = []byte(card.Scrub(buf.String()))
	}
	name := id + "." + kind
	if b, err := h.console.Batch(r.Context(), id); err == nil {
		name = DownloadName(b.File, id, kind)
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", contentDisposition(name))
	_, _ = w.Write(body)
}

// DownloadName is the name a batch's download kind is saved under: the
// payout file's name without its extension, then the kind
// ("payouts-june.result.csv"), as a person finds it again among their
// files; the batch id when the file's name is unknown or holds nothing
// but characters a file name should not.
func DownloadName(file, id, kind string) string {
	base := filepath.Base(strings.ReplaceAll(file, "\\", "/"))
	base = strings.TrimSuffix(base, filepath.Ext(base))
	base = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`"/\:*?<>|`, r) {
			return '_'
		}
		return r
	}, base)
	if strings.Trim(base, "._ ") == "" {
		base = id
	}
	return base + "." + kind
}

// contentDisposition is an attachment header for name: an ASCII fallback
// (other characters as '_') and the exact UTF-8 name (RFC 6266).
func contentDisposition(name string) string {
	ascii := strings.Map(func(r rune) rune {
		if r > 0x7e || r < 0x20 || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, url.PathEscape(name))
}

// decide takes a person's decision on a payout (the form of the payout
// page and the work queue).
func (h *consoleHandlers) decide(w http.ResponseWriter, r *http.Request) {
	pc, enabled := h.controls.(PayoutControls)
	if !h.readOnly && !h.mayTake(w, r, decisionActions[r.PostFormValue("action")]) {
		return
	}
	id, ok := h.formTarget(w, r, enabled, "batch id", batchIDPattern, func(r *http.Request) string { return r.PathValue("id") })
	if !ok {
		return
	}
	ext := r.PathValue("ext")
	if !extPattern.MatchString(ext) {
		http.Error(w, "bad externalId", http.StatusBadRequest)
		return
	}
	d := Decision{Action: r.PostFormValue("action"), OrderID: r.PostFormValue("order"), PSPStatus: r.PostFormValue("psp_status"),
		By: userFrom(r.Context()), Note: strings.TrimSpace(r.PostFormValue("note"))}
	msg, err := pc.DecidePayout(r.Context(), id, ext, d)
	h.doneBack(w, r, "Payout "+card.Scrub(ext), msg, err, "/batches/"+id+"/payouts/"+url.PathEscape(ext), "Back to the payout")
}

// groupDigits writes a decimal amount with thousands separators:
// "1234567.50" is "1,234,567.50". Text, never a float: the digits are the
// ledger's.
func groupDigits(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" {
		return sign + s
	}
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return sign + b.String()
}

func stateLabel(state string) string { return lifecycle.State(state).Label() }

func utcTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// knownState tells whether s is a ledger state.
func knownState(s string) bool {
	_, ok := lifecycle.State(s).Info()
	return ok
}

// maxRefused bounds the refused files listed.
const maxRefused = 50

type refusedPage struct {
	consolePage
	Files []RefusedFile
}

// refusedFiles is the spool's refusals, when the UI has a spool.
func (h *consoleHandlers) refusedFiles() (RefusedFiles, bool) {
	return h.refused, h.refused != nil
}

func (h *consoleHandlers) refusedPage(w http.ResponseWriter, r *http.Request) {
	rf, ok := h.refusedFiles()
	if !ok {
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return
	}
	files, err := rf.Refused(r.Context(), maxRefused)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderConsole(w, r, "refused", refusedPage{consolePage: h.base(r, "Refused files"), Files: files})
}

func (h *consoleHandlers) refusedDownload(w http.ResponseWriter, r *http.Request) {
	rf, ok := h.refusedFiles()
	name := r.PathValue("name")
	if !ok || !extPattern.MatchString(name) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var buf bytes.Buffer
	if err := rf.RefusedErrors(r.Context(), name, &buf); err != nil {
		h.consoleErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name+".errors.csv"))
	_, _ = w.Write([]byte(card.Scrub(buf.String())))
}
