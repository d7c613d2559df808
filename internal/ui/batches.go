package ui

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/rs/zerolog"
)

// BatchSource lists the batches of the ledger for the /batches page. The
// ledger implements it.
type BatchSource interface {
	Batches(ctx context.Context) ([]BatchView, error)
}

// BatchView is the progress of one batch: the figures `payout status` shows.
type BatchView struct {
	ID       string    `json:"id"`
	File     string    `json:"file"`
	LoadedAt time.Time `json:"loadedAt"`
	// Counts holds the number of payouts per state (lifecycle.Machine, and
	// any other state the ledger reports).
	Counts map[string]int64 `json:"counts"`
	// Awaiting is the number of created payouts whose outcome (paid or
	// failed) the workers still follow: part of Counts["created"], not
	// finished.
	Awaiting      int64  `json:"awaitingOutcome"`
	Rows          int64  `json:"rows"`
	AmountCreated string `json:"amountCreated"`
	// AmountPaid, AmountFailed and AmountAwaiting are the amounts of the
	// paid, failed and awaiting payouts, exact decimals.
	AmountPaid     string `json:"amountPaid"`
	AmountFailed   string `json:"amountFailed"`
	AmountAwaiting string `json:"amountAwaiting"`
	AmountTotal    string `json:"amountTotal"`
	// Archive is the archive of an archived batch (payout archive): its
	// figures are the summary kept in Redis.
	Archive string `json:"archive,omitempty"`
	// Phase is the batch's ledger phase (loading, loaded,
	// awaiting_approval, discarded); WaitReason says why it awaits
	// approval and LoadedBy who loaded it.
	Phase string `json:"phase,omitempty"`
	// Interrupted: the batch is loading but no loader works on it (its
	// load lease expired or was released): no payment is sent for it;
	// loading the same file again completes it, payout discard abandons
	// it. State is "loading, interrupted" then, else Phase.
	Interrupted bool   `json:"interrupted,omitempty"`
	State       string `json:"state,omitempty"`
	// PhaseCode, PhaseLabel and PhaseReason are the batch's phase for
	// people (results.PhaseOf: payout status says the same); FourEyes:
	// a second person must approve it.
	PhaseCode   string `json:"phaseCode,omitempty"`
	PhaseLabel  string `json:"phaseLabel,omitempty"`
	PhaseReason string `json:"phaseReason,omitempty"`
	FourEyes    bool   `json:"fourEyes"`
	WaitReason  string `json:"waitReason,omitempty"`
	LoadedBy    string `json:"loadedBy,omitempty"`
	// ApprovalRule is the approval rule the batch was held under, as
	// recorded at load ("total >= 50000: 2 approver (rules.conf:3)");
	// Approvals where its approvals stand ("1 of 2 approvals: alice");
	// Approvers who approved it so far, in order.
	ApprovalRule string   `json:"approvalRule,omitempty"`
	Approvals    string   `json:"approvals,omitempty"`
	Approvers    []string `json:"approvers,omitempty"`
}

// knownStates are the ledger's states in the order the page shows them:
// the order a payout goes through them (lifecycle.Machine). Final states
// (lifecycle.State.Final) end a payout's automatic processing and count as
// progress (a created payout awaiting its outcome excepted: see
// BatchView.Awaiting).
var knownStates = func() []string {
	out := make([]string, len(lifecycle.Machine))
	for i, s := range lifecycle.Machine {
		out[i] = string(s.State)
	}
	return out
}()

// cssColor is a colour a page may print into its style sheet.
var cssColor = regexp.MustCompile(`^#[0-9a-fA-F]{3,8}$`)

// stateRules is one CSS rule per state of lifecycle.Machine: selector(state)
// given the state's colour (Color, or Tint with tint).
func stateRules(selector func(lifecycle.State) string, tint bool) template.CSS {
	var b strings.Builder
	for _, s := range lifecycle.Machine {
		c := s.Color
		if tint {
			c = s.Tint
		}
		if cssColor.MatchString(c) {
			fmt.Fprintf(&b, "%s{background:%s}", selector(s.State), c)
		}
	}
	return template.CSS(b.String())
}

// stateCSS colours the bars, dots and legend of the batches page.
func stateCSS() template.CSS {
	return stateRules(func(s lifecycle.State) string { return ".s-" + string(s) }, false)
}

// tagCSS colours the state tags of the console pages.
func tagCSS() template.CSS {
	return stateRules(func(s lifecycle.State) string { return ".tag." + string(s) }, true)
}

// errNoBatchSource answers the batch pages when Config.Batches is nil.
var errNoBatchSource = errors.New("no batch source configured")

//go:embed templates/batches.html.tmpl
var batchesTemplateText string

//go:embed templates/result.html.tmpl
var resultTemplateText string

var resultTemplate = template.Must(template.New("result").Funcs(template.FuncMap{"money": groupDigits}).Parse(resultTemplateText))

// resultPage is the answer to a form: an action's message, or an
// upload's preview.
type resultPage struct {
	Nonce, CSRF, Title, Message string
	// Refused: the message says why nothing was done; Notice: it was
	// done, and the message says what is left to the system.
	Refused, Notice bool
	Preview         *Preview
	// Back links to where the action was taken (default: /batches).
	Back, BackLabel string
}

var batchesTemplate = template.Must(template.New("batches").Funcs(template.FuncMap{
	"pct": func(n, total int64) string {
		if total <= 0 {
			return "0"
		}
		// Display width only (never money): two decimals, rounded down so
		// the segments never add up to more than 100%.
		return fmt.Sprintf("%d.%02d", n*100/total, (n*10000/total)%100)
	},
	"label":    func(state string) string { return lifecycle.State(state).Label() },
	"stateCSS": stateCSS,
	"money":    groupDigits,
	"nonzero":  func(s string) bool { return strings.Trim(s, "0.-") != "" },
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	// utcwrap is utc that may break between the day and the time, for a
	// narrow column.
	"utcwrap": func(t time.Time) template.HTML {
		if t.IsZero() {
			return "-"
		}
		t = t.UTC()
		return template.HTML(`<span class="nw">` + t.Format("2006-01-02") + `</span> <span class="nw">` + t.Format("15:04:05") + ` UTC</span>`)
	},
}).Parse(batchesTemplateText))

type batchesPage struct {
	Nonce       string
	GeneratedAt time.Time
	States      []string
	Batches     []batchRow
	ReadOnly    bool
	// Forms: the approval forms (Actions) and the upload form (Upload),
	// carrying the CSRF token of the signed-in user.
	CSRF    string
	Actions bool
	Upload  bool
	// NoUpload and NoDiscard say why the signed-in person is not offered
	// the upload form or Discard (their roles); Discard: they are.
	NoUpload  string
	Discard   bool
	NoDiscard string
	Awaiting  []batchRow
	// Console: the batch pages, the work queue and the search exist.
	Console bool
	// Paused: a batch is on hold because the payout queue is paused
	// (phase paused): the page says so in a banner.
	Paused bool
	// SignOut: someone is signed in, and offered to sign out.
	SignOut bool
}

// phasePaused is results.PhasePaused: a batch with payouts in
// progress while the payout queue is paused.
const phasePaused = "paused"

type batchRow struct {
	BatchView
	Index int
	// Offer: whether the signed-in person may approve it (awaiting
	// approval), and why not.
	Offer    approveOffer
	Finished int64
	Counts   []stateCount
}

type stateCount struct {
	State string
	N     int64
}

// listBatches reads the batches, newest first, with non-nil counts.
func listBatches(ctx context.Context, src BatchSource) ([]BatchView, error) {
	if src == nil {
		return nil, errNoBatchSource
	}
	bs, err := src.Batches(ctx)
	if err != nil {
		return nil, fmt.Errorf("ui: list batches: %w", err)
	}
	out := make([]BatchView, len(bs))
	copy(out, bs)
	for i := range out {
		if out[i].Counts == nil {
			out[i].Counts = map[string]int64{}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LoadedAt.After(out[j].LoadedAt) })
	return out, nil
}

// pageStates is the known states followed by any other state a batch
// reports, so that no count is silently left off the page.
func pageStates(bs []BatchView) []string {
	states := append([]string(nil), knownStates...)
	seen := map[string]bool{}
	for _, s := range knownStates {
		seen[s] = true
	}
	var extra []string
	for _, b := range bs {
		for s := range b.Counts {
			if !seen[s] {
				seen[s] = true
				extra = append(extra, s)
			}
		}
	}
	sort.Strings(extra)
	return append(states, extra...)
}

func buildBatchesPage(bs []BatchView, nonce string, now time.Time, readOnly bool) batchesPage {
	p := batchesPage{Nonce: nonce, GeneratedAt: now, States: pageStates(bs), ReadOnly: readOnly}
	for i, b := range bs {
		row := batchRow{BatchView: b, Index: i}
		for _, s := range p.States {
			n := b.Counts[s]
			row.Counts = append(row.Counts, stateCount{State: s, N: n})
			if lifecycle.State(s).Final() {
				row.Finished += n
			}
		}
		row.Finished -= min(b.Awaiting, b.Counts[string(lifecycle.Created)])
		p.Batches = append(p.Batches, row)
		p.Paused = p.Paused || b.PhaseCode == phasePaused
		if b.Phase == lifecycle.PhaseAwaiting {
			p.Awaiting = append(p.Awaiting, row)
		}
	}
	return p
}

// batchHandlers serve the batches page and its JSON, Approve and Discard
// from that page and the sign-out, and hold what every form shares (the
// CSRF tokens, the read-only guard, the answer pages); consoleHandlers and
// uploadHandlers build on them.
type batchHandlers struct {
	src      BatchSource
	log      zerolog.Logger
	now      func() time.Time
	readOnly bool
	controls Controls
	csrf     *csrfTokens
	fourEyes bool
	// hasConsole and hasUploads: the console and the upload are
	// configured, so the batches page links to them.
	hasConsole, hasUploads bool
}

// consoleHandlers serve the finance console (Config.Console): a batch's
// page, a payout's page and its decision, the work queue, the search, the
// refused files, the downloads and the approval review. They share the
// forms' plumbing of batchHandlers.
type consoleHandlers struct {
	*batchHandlers
	console Console
	refused RefusedFiles // the spool's refusals; nil without a spool
}

// uploadHandlers serve the upload of a payout file, its preview and its
// confirmation (Config.Uploads). They share the forms' plumbing of
// batchHandlers.
type uploadHandlers struct {
	*batchHandlers
	uploads     Uploads
	uploadLimit int64
	uploadSlots chan struct{} // a semaphore: one element per upload running
}

// render writes a form's answer page.
func (h *batchHandlers) render(w http.ResponseWriter, r *http.Request, code int, p resultPage) {
	p.Nonce, p.CSRF = nonceFrom(r.Context()), h.csrf.token(r)
	var buf bytes.Buffer
	if err := resultTemplate.Execute(&buf, p); err != nil {
		h.fail(w, r, fmt.Errorf("ui: render result: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (h *batchHandlers) page(w http.ResponseWriter, r *http.Request) {
	bs, err := listBatches(r.Context(), h.src)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := buildBatchesPage(bs, nonceFrom(r.Context()), h.now(), h.readOnly)
	p.Console = h.hasConsole
	p.SignOut = userFrom(r.Context()) != ""
	for i := range p.Awaiting {
		p.Awaiting[i].Offer = h.approveOffer(r, p.Awaiting[i].BatchView)
	}
	if !h.readOnly {
		p.Actions, p.Upload = h.controls != nil, h.hasUploads
		if p.Upload {
			p.NoUpload = whyNot(r, access.Load)
			p.Upload = p.NoUpload == ""
		}
		if p.Actions {
			p.NoDiscard = whyNot(r, access.Discard)
			p.Discard = p.NoDiscard == ""
		}
		if p.Actions || p.Upload {
			p.CSRF = h.csrf.token(r)
		}
	}
	var buf bytes.Buffer
	if err := batchesTemplate.Execute(&buf, p); err != nil {
		h.fail(w, r, fmt.Errorf("ui: render batches: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

type batchesJSON struct {
	GeneratedAt time.Time   `json:"generatedAt"`
	Batches     []BatchView `json:"batches"`
}

func (h *batchHandlers) api(w http.ResponseWriter, r *http.Request) {
	bs, err := listBatches(r.Context(), h.src)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := json.Marshal(batchesJSON{GeneratedAt: h.now().UTC(), Batches: bs})
	if err != nil {
		h.fail(w, r, fmt.Errorf("ui: encode batches: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// ledgerUnreachablePage is what a person sees when the ledger cannot be
// read: that payments wait and nothing is lost, and that the page tries
// again by itself.
const ledgerUnreachablePage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>Payments on hold: payout</title>
<style>body{font:16px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:44rem;padding:0 1rem;color:#1d2733}
.msg{border-left:4px solid #b7791f;background:#fffaf0;padding:.75rem 1rem}</style></head>
<body><h1>Batches</h1>
<p class="msg" id="unreachable-banner" role="status"><b>Payments are on hold</b>: the ledger (Redis) cannot be reached just now.
Nothing is sent and nothing is lost; payouts go on where they stopped once it answers again.
This page tries again every 10 seconds.</p>
</body></html>
`

// fail logs err and answers 503 without detail (the ledger's error may name
// internals): a page that says payments are on hold for a person, a short
// text for the JSON API.
func (h *batchHandlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error().Err(err).Str("path", r.URL.Path).Msg("ui: batches unavailable")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		http.Error(w, "batch progress unavailable: the ledger cannot be reached", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Retry-After", "10")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, ledgerUnreachablePage)
}
