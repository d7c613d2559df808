package cli

import (
	"flag"
	"time"

	"github.com/acme/payout/internal/mail"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// mailFlags say how a worker sends the mail to people (package mail).
type mailFlags struct {
	smtpURL, passwordFile string
	allowPlain            bool
	from, recipients      string
	consoleURL            string
	digestEvery           time.Duration
	concurrency           int

	// read by check
	sender *mail.SMTP
	rcpt   *mail.Recipients
}

func (m *mailFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.smtpURL, "smtp-url", "", "send the mail to people (approval requests, batch final, review digest, failing webhooks; queued by commands run with --mail) through this mail server: "+
		"smtp://[USER@]HOST[:587] (STARTTLS required) or smtps://[USER@]HOST[:465] (TLS); empty: this worker sends no mail")
	fs.StringVar(&m.passwordFile, "smtp-password-file", "", "file holding the SMTP password of the USER of --smtp-url (read once at start, never logged)")
	fs.BoolVar(&m.allowPlain, "smtp-allow-plain", false, "let smtp:// go without TLS, to a mail server on this machine (loopback) only: tests")
	fs.StringVar(&m.from, "mail-from", "", "From address of the mails (\"payout <payout@example.com>\"); required with --smtp-url")
	fs.StringVar(&m.recipients, "mail-recipients", "", "the recipients file: who gets what, by role, person and webhook endpoint (docs/operations.md#mail-to-people); required with --smtp-url")
	fs.StringVar(&m.consoleURL, "console-url", "", "base URL of the console (payout ui) in the mails' links, e.g. https://payout.example.com; required with --smtp-url")
	fs.DurationVar(&m.digestEvery, "mail-digest-every", mail.DefaultDigestEvery, "window of the operators' digest of payouts needing review: one mail per window, not one per payout")
	fs.IntVar(&m.concurrency, "mail-concurrency", 2, "mail tasks this worker runs at once, on a server of their own beside the payouts'")
}

// check reads what the mail flags name (the SMTP settings, the password
// file, the recipients file) before anything else is done; every problem
// of the mail flags is reported at once.
func (m *mailFlags) check() error {
	if m.smtpURL == "" {
		return nil
	}
	var probs problems
	for _, f := range []struct{ name, value string }{{"mail-from", m.from}, {"mail-recipients", m.recipients}, {"console-url", m.consoleURL}} {
		if f.value == "" {
			probs.flag(f.name, "--smtp-url needs --%s", f.name)
		}
	}
	if m.digestEvery < time.Minute {
		probs.flag("mail-digest-every", "--mail-digest-every %s: at least 1m", m.digestEvery)
	}
	if err := probs.err(); err != nil {
		return err
	}
	var err error
	if m.sender, err = mail.NewSMTP(mail.SMTPConfig{URL: m.smtpURL, PasswordFile: m.passwordFile, AllowPlain: m.allowPlain, From: m.from}); err != nil {
		return configErr(err)
	}
	if m.rcpt, err = mail.LoadRecipients(m.recipients); err != nil {
		return configErr(err)
	}
	return nil
}

// configure builds the worker's Mailer when --smtp-url is set (check
// came first).
func (m *mailFlags) configure(rdb redis.UniversalClient, c *worker.Config, log zerolog.Logger) error {
	if m.sender == nil {
		return nil
	}
	mlog := log.With().Str("component", "mail").Logger()
	mailer, err := mail.New(mail.Config{Redis: rdb, Queue: queue.New(rdb), Sender: m.sender, Recipients: m.rcpt,
		ConsoleURL: m.consoleURL, DigestEvery: m.digestEvery, Logger: mlog})
	if err != nil {
		return configErr(err)
	}
	c.Mail = worker.MailConfig{Mailer: mailer, Concurrency: m.concurrency}
	mlog.Info().Str("smtp", m.sender.String()).Msg("mail to people on")
	return nil
}
