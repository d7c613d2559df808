// Package mail tells people by mail what waits for them and what became of
// their batches: the approvers of a batch awaiting approval (with a link to
// its page in the console), the maker of a batch that became final (its
// totals and counts per state), the operators a digest of the payouts that
// need review, and the owner of a webhook endpoint whose deliveries keep
// failing. Who gets what is the recipients file (ParseRecipients), by role,
// person and endpoint; the mails are plain text with a simple HTML
// alternative (templates/), amounts with their decimals, card numbers
// masked, never a PSP token.
//
// Mail never stands in the way of a payout. Whatever emits a notify event
// (the loader, the workers, payout run) hands it to a Sink, which only
// enqueues a task on the mail queue (queue.MailQueue, with
// payout --mail); a worker with --smtp-url runs a Mailer on an Asynq server
// of its own (internal/worker), and a mail server that is down or slow only
// makes those tasks retry with backoff (RetryDelay, queue.MailMaxRetry).
//
// At most one mail per person per event: before its SMTP transaction a
// mail is marked in Redis (keys.MailSent, SET NX with DedupeTTL). A send
// that provably failed (no connection, a refusal before or at the end of
// the message) removes the mark, and the task's retry sends it; a send that
// may have delivered (the reply to the end of the message was lost), or a
// worker killed between the mark and the reply, keeps the mark: that mail
// is not sent again (at most once, not at least once), and the log says
// so. The mail is a reminder: what it tells stays in the console.
package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The task types of the mail queue.
const (
	TypeEvent    = "mail:event"    // a notify event that people may be mailed about
	TypeDigest   = "mail:digest"   // the digest of payouts needing review, of one window
	TypeEndpoint = "mail:endpoint" // a webhook endpoint whose deliveries keep failing
)

const (
	// DedupeTTL is how long a mail's mark (keys.MailSent) refuses the
	// same mail to the same person.
	DedupeTTL = 7 * 24 * time.Hour
	// eventRetention keeps a done event task, so that the same event
	// emitted again meanwhile is refused by its task ID.
	eventRetention = 24 * time.Hour
	// DefaultDigestEvery is the window of the review digest.
	DefaultDigestEvery = 10 * time.Minute
	// DigestLines is how many payouts a digest lists; the rest are
	// counted and left to the work queue.
	DigestLines = 50
	// digestRead bounds the payouts one digest takes from Redis.
	digestRead = 5000
)

// ErrPermanent is matched by the errors of a task that no retry can help
// (a malformed payload): the worker archives it.
var ErrPermanent = errors.New("mail: task cannot succeed")

// Enqueuer hands tasks to the mail queue (*queue.Queue).
type Enqueuer interface {
	AddMail(ctx context.Context, t queue.MailTask) (bool, error)
}

// eventTask is the payload of TypeEvent: the event's facts; the figures
// are read when the mail is sent.
type eventTask struct {
	ID         string      `json:"id"`
	Type       notify.Type `json:"type"`
	Batch      string      `json:"batch,omitempty"`
	ExternalID string      `json:"externalId,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Time       time.Time   `json:"time"`
}

// Sink hands the events people are mailed about to the mail queue: a
// notify.Sink.
type Sink struct{ q Enqueuer }

// NewSink returns the Sink enqueuing on q.
func NewSink(q Enqueuer) *Sink { return &Sink{q: q} }

// Accept enqueues the mail task of ev, if people are mailed about its
// type (a batch awaiting approval, a batch final, a payout needing
// review). The same event again within a day is refused by its task ID.
func (s *Sink) Accept(ctx context.Context, ev notify.Event) error {
	switch ev.Type {
	case notify.BatchAwaitingApproval, notify.BatchFinal, notify.PayoutNeedsReview:
	default:
		return nil
	}
	p, err := json.Marshal(eventTask{ID: ev.ID, Type: ev.Type, Batch: ev.Batch, ExternalID: ev.ExternalID, Reason: ev.Reason, Time: ev.Time})
	if err != nil {
		return fmt.Errorf("mail: encode %s event: %w", ev.Type, err)
	}
	_, err = s.q.AddMail(ctx, queue.MailTask{Type: TypeEvent, ID: "mail:event:" + ev.ID, Payload: p, Retention: eventRetention})
	return err
}

// EnqueueEndpointFailure enqueues the mail to the owners of a webhook
// endpoint whose deliveries keep failing (the delivery log calls it, in
// any process); one mail per person per f.Episode.
func EnqueueEndpointFailure(ctx context.Context, q Enqueuer, f EndpointFailure) error {
	if f.Endpoint == "" || f.Episode == "" {
		return fmt.Errorf("mail: endpoint failure without endpoint or episode: %w", ErrPermanent)
	}
	p, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("mail: encode endpoint failure: %w", err)
	}
	_, err = q.AddMail(ctx, queue.MailTask{Type: TypeEndpoint, ID: "mail:endpoint:" + endpointEvent(f), Payload: p, Retention: eventRetention})
	return err
}

// endpointEvent is the event id of an endpoint's failing episode.
func endpointEvent(f EndpointFailure) string {
	h := sha256.Sum256([]byte(f.Endpoint + "\x00" + f.Episode))
	return "endpoint-" + hex.EncodeToString(h[:])[:24]
}

// RetryDelay backs off from 10 s, doubling, up to an hour, jittered in
// the upper half: queue.MailMaxRetry retries span about a day.
func RetryDelay(n int) time.Duration {
	d := 10 * time.Second
	for i := 0; i < n && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// Config is what a Mailer needs.
type Config struct {
	Redis      redis.UniversalClient
	Queue      Enqueuer // the digest's tasks
	Sender     Sender
	Recipients *Recipients
	// ConsoleURL is the base URL of the console (payout ui) in the links.
	ConsoleURL string
	// DigestEvery is the window of the review digest (0: the default).
	DigestEvery time.Duration
	// ApproverRole names the role whose members approve batch b (an
	// approval rule's role); nil: RoleApprover for every batch.
	ApproverRole func(b ledger.Batch) string
	Logger       zerolog.Logger
	Now          func() time.Time // nil: time.Now
}

// Mailer runs the mail tasks: it reads what a mail tells, renders it and
// sends it once per person.
type Mailer struct {
	cfg     Config
	console string
	view    *view.Reader
}

// New checks cfg and returns its Mailer.
func New(cfg Config) (*Mailer, error) {
	u, err := url.Parse(cfg.ConsoleURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --console-url %q: want the console's http(s) base URL (the links of the mails)", ErrSMTPConfig, cfg.ConsoleURL)
	}
	if cfg.Redis == nil || cfg.Queue == nil || cfg.Sender == nil {
		return nil, errors.New("mail: Config needs Redis, Queue and Sender")
	}
	if cfg.DigestEvery <= 0 {
		cfg.DigestEvery = DefaultDigestEvery
	}
	if cfg.ApproverRole == nil {
		cfg.ApproverRole = func(ledger.Batch) string { return RoleApprover }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Mailer{cfg: cfg, console: strings.TrimRight(cfg.ConsoleURL, "/"), view: view.New(cfg.Redis)}, nil
}

// Handle runs one task of the mail queue. Its error matches ErrPermanent
// when no retry can help; any other error is retried.
func (m *Mailer) Handle(ctx context.Context, typ string, payload []byte) error {
	switch typ {
	case TypeEvent:
		var ev eventTask
		if err := json.Unmarshal(payload, &ev); err != nil || ev.ID == "" {
			return fmt.Errorf("mail: malformed event task: %w", ErrPermanent)
		}
		return m.event(ctx, ev)
	case TypeDigest:
		var d digestTask
		if err := json.Unmarshal(payload, &d); err != nil || d.End == 0 {
			return fmt.Errorf("mail: malformed digest task: %w", ErrPermanent)
		}
		return m.digest(ctx, d)
	case TypeEndpoint:
		var f EndpointFailure
		if err := json.Unmarshal(payload, &f); err != nil || f.Endpoint == "" || f.Episode == "" {
			return fmt.Errorf("mail: malformed endpoint task: %w", ErrPermanent)
		}
		return m.endpoint(ctx, f)
	}
	return fmt.Errorf("mail: unknown task type %q: %w", typ, ErrPermanent)
}

func (m *Mailer) event(ctx context.Context, ev eventTask) error {
	switch ev.Type {
	case notify.BatchAwaitingApproval:
		return m.approval(ctx, ev)
	case notify.BatchFinal:
		return m.final(ctx, ev)
	case notify.PayoutNeedsReview:
		return m.addToDigest(ctx, ev)
	}
	return nil
}

// link is the console's URL of path.
func (m *Mailer) link(path string) string { return m.console + path }

func batchPath(batch string) string { return "/batches/" + url.PathEscape(batch) }

func (m *Mailer) endpoint(ctx context.Context, f EndpointFailure) error {
	f.Link = m.link(f.Path)
	if f.Path == "" {
		f.Link = m.link("/")
	}
	msg, err := RenderEndpoint(f)
	if err != nil {
		return err
	}
	return m.sendAll(ctx, endpointEvent(f), m.cfg.Recipients.Endpoint(f.Endpoint), msg, "endpoint "+f.Endpoint)
}
