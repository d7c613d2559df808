package mail

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/acme/payout/internal/card"
)

// Message is one mail: its subject, its plain text and its simple HTML
// alternative. Everything in it came through the renderers below, which
// mask card numbers (card.Scrub) in every text they were given.
type Message struct {
	Subject string
	Text    string
	HTML    string
}

// BatchFigures is what an approval request and a batch-final mail say
// about a batch. Amounts are decimal text with the batch's decimals
// (money.Amount.StringFixed), never floats.
type BatchFigures struct {
	Batch    string
	File     string
	LoadedBy string
	LoadedAt time.Time
	Rows     int64
	Total    string
	Reason   string // why it waits (approval request)
	FourEyes bool
	Link     string // its page in the console
	// States: rows and amount per state, in the state machine's order,
	// only the states holding some (batch-final mail).
	States []StateFigure
}

// StateFigure is one state's rows and amount in a batch.
type StateFigure struct {
	State  string // as people read it (lifecycle.State.Label)
	Rows   int64
	Amount string
}

// ReviewLine is one payout in a digest of payouts needing review.
type ReviewLine struct {
	Batch       string
	File        string
	ExternalID  string
	Amount      string
	Destination string // masked
	Reason      string
	Link        string
}

// Digest is the digest of payouts needing review.
type Digest struct {
	Lines []ReviewLine
	More  int    // payouts beyond the lines, left to the work queue
	Link  string // the console's work queue
}

// EndpointFailure is what the owner of a webhook endpoint is told when its
// deliveries keep failing (Enqueuer of the delivery log:
// EnqueueEndpointFailure).
type EndpointFailure struct {
	// Endpoint names it as the recipients file's "endpoint NAME:" line
	// does (its id or its URL without secrets).
	Endpoint string `json:"endpoint"`
	// Episode tells this run of failures from a later one (the time of
	// its first failure): one mail per person per episode.
	Episode   string    `json:"episode"`
	Failures  int       `json:"failures"`
	Since     time.Time `json:"since"`
	LastError string    `json:"lastError,omitempty"`
	// Path is the delivery log's page in the console, relative to its
	// base URL ("/webhooks/ID"); empty: the console's home.
	Path string `json:"path,omitempty"`
	Link string `json:"-"`
}

//go:embed templates
var templateFS embed.FS

var (
	textTemplates = texttemplate.Must(texttemplate.New("").Funcs(texttemplate.FuncMap{"when": when}).ParseFS(templateFS, "templates/*.txt"))
	htmlTemplates = htmltemplate.Must(htmltemplate.New("").Funcs(htmltemplate.FuncMap{"when": when}).ParseFS(templateFS, "templates/*.html"))
)

// when writes a time for people: UTC, to the minute.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// render fills the text and HTML templates called name.
func render(name, subject string, data any) (Message, error) {
	var txt, html bytes.Buffer
	if err := textTemplates.ExecuteTemplate(&txt, name+".txt", data); err != nil {
		return Message{}, fmt.Errorf("mail: render %s text: %w", name, err)
	}
	if err := htmlTemplates.ExecuteTemplate(&html, name+".html", data); err != nil {
		return Message{}, fmt.Errorf("mail: render %s html: %w", name, err)
	}
	return Message{Subject: oneLine(card.Scrub(subject)), Text: card.Scrub(txt.String()), HTML: card.Scrub(html.String())}, nil
}

// oneLine keeps a subject on one header line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// scrubBatch masks card numbers in what people or the PSP typed.
func (b BatchFigures) scrubbed() BatchFigures {
	b.File, b.Reason, b.LoadedBy = card.Scrub(b.File), card.Scrub(b.Reason), card.Scrub(b.LoadedBy)
	return b
}

// RenderApproval is the approval request of a batch awaiting approval.
func RenderApproval(b BatchFigures) (Message, error) {
	b = b.scrubbed()
	return render("approval", fmt.Sprintf("[payout] Approval needed: %s, %d payouts, %s", b.File, b.Rows, b.Total), b)
}

// RenderFinal is the batch-final mail to its maker.
func RenderFinal(b BatchFigures) (Message, error) {
	b = b.scrubbed()
	return render("final", fmt.Sprintf("[payout] Batch final: %s, %d payouts, %s", b.File, b.Rows, b.Total), b)
}

// RenderDigest is the digest of payouts needing review.
func RenderDigest(d Digest) (Message, error) {
	for i, l := range d.Lines {
		l.File, l.Reason, l.Destination, l.ExternalID = card.Scrub(l.File), card.Scrub(l.Reason), card.Scrub(l.Destination), card.Scrub(l.ExternalID)
		d.Lines[i] = l
	}
	n := len(d.Lines) + d.More
	noun := "payouts need"
	if n == 1 {
		noun = "payout needs"
	}
	return render("digest", fmt.Sprintf("[payout] %d %s review", n, noun), d)
}

// RenderEndpoint is the mail to a webhook endpoint's owner.
func RenderEndpoint(f EndpointFailure) (Message, error) {
	f.Endpoint, f.LastError = card.Scrub(f.Endpoint), card.Scrub(f.LastError)
	return render("endpoint", fmt.Sprintf("[payout] Webhook deliveries failing: %s", f.Endpoint), f)
}
