package worker

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/mail"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/testenv/smtptest"
	"github.com/acme/payout/internal/sandbox"
)

const testRecipients = `approvers: ann@example.com, bob@example.com, alice
operators: ops@example.com
person alice: alice@example.com
`

// withMail makes the harness's worker queue the mail of its events and
// send the mail queue through smtpURL.
func (h *harness) withMail(smtpURL string, timeout, digestEvery time.Duration) *notify.Emitter {
	h.t.Helper()
	rc, err := mail.ParseRecipients("recipients", strings.NewReader(testRecipients))
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := mail.NewSMTP(mail.SMTPConfig{URL: smtpURL, AllowPlain: true, From: "payout <payout@example.com>", Timeout: timeout})
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := mail.New(mail.Config{Redis: h.rdb, Queue: h.queue, Sender: s, Recipients: rc, ConsoleURL: "https://payout.example.com",
		DigestEvery: digestEvery, Logger: testLogger(h).With().Str("component", "mail").Logger()})
	if err != nil {
		h.t.Fatal(err)
	}
	em := notify.NewEmitter(h.rdb, nil, mail.NewSink(h.queue))
	h.cfg.Notify = NotifyConfig{Emitter: em}
	h.cfg.Mail = MailConfig{Mailer: m, Concurrency: 2}
	return em
}

// spoil makes payout ext unreadable to the worker: it needs review.
func (h *harness) spoil(ext string) {
	h.t.Helper()
	ctx := context.Background()
	key := keys.Payout(h.batch, ext)
	sealed, _ := h.rdb.HGet(ctx, key, "sealed").Result()
	h.rdb.HSet(ctx, key, "sealed", sealed[:len(sealed)-4]+"AAAA")
}

// begin records batch id as loaded by alice under four-eyes, before its
// payouts are registered (add: 10.50 each).
func (h *harness) begin(id, file string, rows int, total string) {
	h.t.Helper()
	if _, _, err := h.ledger.BeginBatch(context.Background(), ledger.Batch{ID: id, File: file, LoadedAt: time.Now(), Rows: int64(rows),
		Total: money.MustParse(total), Scale: 2, LoadedBy: "alice", FourEyes: true}); err != nil {
		h.t.Fatal(err)
	}
	h.batch = id
}

// TestMailNeverDelaysPayouts: a mail server that takes connections and
// never answers holds every slot of the mail server (and the mail tasks
// behind them wait), and the payouts drain all the same, within the
// deadline the notifications' test gives them.
func TestMailNeverDelaysPayouts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var hanging atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hanging.Add(1)
			defer c.Close() // never a greeting
		}
	}()

	cfg := fastConfig()
	cfg.Concurrency = 2
	h := newHarness(t, cfg, sandbox.Config{})
	h.withMail("smtp://"+ln.Addr().String(), time.Minute, time.Second)
	ctx := context.Background()
	// A backlog of mails, more than the mail server runs at once.
	for i := range 10 {
		f := mail.EndpointFailure{Endpoint: "https://hooks.example.com/" + fmt.Sprint(i), Episode: "1", Failures: 3, Since: time.Now()}
		if err := mail.EnqueueEndpointFailure(ctx, h.queue, f); err != nil {
			t.Fatal(err)
		}
	}
	h.begin("june", "june.csv", 8, "84.00")
	ids := h.add(visa, visa, visa, visa, visa, visa, visa, visa)
	h.spoil(ids[0]) // its needs_review queues a mail too
	start := time.Now()
	h.start()
	h.waitFor("mail hanging at the SMTP server", 5*time.Second, func() bool { return hanging.Load() >= 2 })
	c := h.waitFinal(5 * time.Second)
	took := time.Since(start)
	if c.Rows[lifecycle.Created] != int64(len(ids)-1) || c.Rows[lifecycle.NeedsReview] != 1 {
		t.Fatalf("counts %+v", c.Rows)
	}
	info, err := h.insp.GetQueueInfo("mail")
	if err != nil {
		t.Fatal(err)
	}
	if info.Active < 2 || info.Processed > 0 {
		t.Fatalf("the mail stopped hanging before the payouts drained (%+v): the test proves nothing", info)
	}
	t.Logf("8 payouts final in %s while %d SMTP connections hung and %d mail tasks waited", took.Round(time.Millisecond), hanging.Load(), info.Size)
}

// TestMailReachesPeople: through a real SMTP server (python3-aiosmtpd),
// the approvers get the approval request (not the maker, under
// four-eyes), the maker the batch-final mail, the operators one digest of
// the payouts needing review; every amount with its decimals, no card
// number in full.
func TestMailReachesPeople(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	h := newHarness(t, fastConfig(), sandbox.Config{})
	em := h.withMail(srv.URL(), 10*time.Second, time.Second)
	ctx := context.Background()

	h.begin("held", "payroll-held.csv", 2, "1234.56")
	if _, err := h.ledger.Register(ctx, "held", []ledger.NewPayout{
		{Line: 2, ExternalID: "H-1", Amount: money.MustParse("1234.00"), Destination: "card 411111******1111"},
		{Line: 3, ExternalID: "H-2", Amount: money.MustParse("0.56"), Destination: "card 555555******4444"},
	}, 2); err != nil {
		t.Fatal(err)
	}
	if err := h.ledger.Controls().HoldBatch(ctx, "held", "approval required: over the daily limit"); err != nil {
		t.Fatal(err)
	}
	if err := em.Emit(ctx, notify.AwaitingApproval("held", "approval required")); err != nil {
		t.Fatal(err)
	}

	h.begin("june", "payroll-june.csv", 3, "31.50")
	ids := h.add(visa, visa, visa)
	h.spoil(ids[1])
	h.start()
	h.waitFinal(10 * time.Second)
	if err := em.Emit(ctx, notify.Final("june", nil)); err != nil {
		t.Fatal(err)
	}

	msgs := srv.Wait(t, 4, 20*time.Second)
	byTo := map[string]smtptest.Message{}
	for _, m := range msgs {
		if strings.Contains(strings.ReplaceAll(m.Raw, " ", ""), visa) {
			t.Errorf("a full card number in the mail to %v:\n%s", m.To, m.Raw)
		}
		byTo[strings.Join(m.To, ",")+" "+strings.Fields(m.Subject)[1]] = m
	}
	checks := []struct {
		key  string
		want []string
	}{
		{"ann@example.com Approval", []string{"payroll-held.csv", "1234.56", "https://payout.example.com/batches/held/approve", "over the daily limit"}},
		{"bob@example.com Approval", []string{"1234.56"}},
		{"alice@example.com Batch", []string{"payroll-june.csv", "31.50", "created", "21.00", "needs review", "10.50", "https://payout.example.com/batches/june"}},
		{"ops@example.com 1", []string{"1 payout needs review", ids[1], "10.50", "411111...", "https://payout.example.com/queue"}},
	}
	for _, c := range checks {
		m, ok := byTo[c.key]
		if !ok {
			t.Errorf("no mail %q among %d: %v", c.key, len(msgs), keysOf(byTo))
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(m.Subject+"\n"+m.Text, w) {
				t.Errorf("%s: %q missing from the text:\n%s\n%s", c.key, w, m.Subject, m.Text)
			}
			if amount.MatchString(w) && !strings.Contains(m.HTML, w) {
				t.Errorf("%s: %q missing from the HTML:\n%s", c.key, w, m.HTML)
			}
		}
	}
	if len(msgs) != 4 {
		t.Errorf("%d mails, want 4 (alice, who loaded the held batch under four-eyes, gets no approval request): %v", len(msgs), keysOf(byTo))
	}
}

var amount = regexp.MustCompile(`^[0-9]+\.[0-9]{2}$`)

func keysOf(m map[string]smtptest.Message) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
