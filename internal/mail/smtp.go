package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Sender sends one message to one person. Its errors match ErrNotSent
// when the server provably did not take the message (then it may be sent
// again), and ErrMaybeSent when it may have (the reply to the end of the
// message was lost).
type Sender interface {
	Send(ctx context.Context, to *netmail.Address, m Message) error
}

// The outcomes of a failed send.
var (
	ErrNotSent   = errors.New("mail: not sent")
	ErrMaybeSent = errors.New("mail: maybe sent (the server's reply to the message was lost)")
)

// SMTPConfig says how to reach the mail server.
type SMTPConfig struct {
	// URL is smtp://[USER@]HOST[:PORT] (STARTTLS required, port 587 by
	// default) or smtps://[USER@]HOST[:PORT] (TLS from the first byte,
	// port 465). A password in the URL is refused: PasswordFile.
	URL string
	// PasswordFile holds the SMTP password of USER (one line); it is read
	// once, here, and never logged.
	PasswordFile string
	// AllowPlain lets smtp:// go without TLS, to a loopback host only
	// (tests against a local server).
	AllowPlain bool
	From       string        // the From address
	Timeout    time.Duration // connect and each SMTP command; 0: 30s
}

// ErrSMTPConfig is matched by every error of an unusable SMTPConfig.
var ErrSMTPConfig = errors.New("mail: bad SMTP configuration")

// SMTP sends through one mail server with go-mail.
type SMTP struct {
	client *gomail.Client
	from   *netmail.Address
	server string // scheme://host:port, for logs
}

// NewSMTP checks cfg and returns its sender; nothing is dialled yet.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: --smtp-url: want smtp://HOST[:PORT] or smtps://HOST[:PORT]", ErrSMTPConfig)
	}
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("%w: --smtp-url holds a password: put it in --smtp-password-file", ErrSMTPConfig)
	}
	from, err := netmail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("%w: --mail-from %q: %v", ErrSMTPConfig, cfg.From, err)
	}
	opts, port, err := transport(u, cfg.AllowPlain)
	if err != nil {
		return nil, err
	}
	auth, err := authOptions(u.User.Username(), cfg.PasswordFile)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	opts = append(opts, auth...)
	opts = append(opts, gomail.WithPort(port), gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(&tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}))
	c, err := gomail.NewClient(u.Hostname(), opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSMTPConfig, err)
	}
	return &SMTP{client: c, from: from, server: u.Scheme + "://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(port))}, nil
}

// transport is the TLS policy and port of u.
func transport(u *url.URL, allowPlain bool) ([]gomail.Option, int, error) {
	port := 0
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return nil, 0, fmt.Errorf("%w: --smtp-url: bad port %q", ErrSMTPConfig, p)
		}
		port = n
	}
	switch u.Scheme {
	case "smtps":
		return []gomail.Option{gomail.WithSSL()}, orPort(port, 465), nil
	case "smtp":
		if !allowPlain {
			return []gomail.Option{gomail.WithTLSPolicy(gomail.TLSMandatory)}, orPort(port, 587), nil
		}
		if !loopback(u.Hostname()) {
			return nil, 0, fmt.Errorf("%w: --smtp-allow-plain is for a mail server on this machine (loopback), not %s", ErrSMTPConfig, u.Hostname())
		}
		return []gomail.Option{gomail.WithTLSPolicy(gomail.NoTLS)}, orPort(port, 25), nil
	}
	return nil, 0, fmt.Errorf("%w: --smtp-url: scheme %q: want smtp (STARTTLS) or smtps (TLS)", ErrSMTPConfig, u.Scheme)
}

func orPort(p, def int) int {
	if p == 0 {
		return def
	}
	return p
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authOptions are SMTP AUTH of user with the password in file: both or
// neither.
func authOptions(user, file string) ([]gomail.Option, error) {
	switch {
	case user == "" && file == "":
		return nil, nil
	case user == "":
		return nil, fmt.Errorf("%w: --smtp-password-file without a user in --smtp-url (smtp://USER@HOST)", ErrSMTPConfig)
	case file == "":
		return nil, fmt.Errorf("%w: --smtp-url names user %s but no --smtp-password-file", ErrSMTPConfig, user)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: --smtp-password-file: %v", ErrSMTPConfig, errors.Unwrap(err))
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return nil, fmt.Errorf("%w: --smtp-password-file %s is empty", ErrSMTPConfig, file)
	}
	return []gomail.Option{gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover), gomail.WithUsername(user), gomail.WithPassword(pw)}, nil
}

// String names the server: scheme, host and port, never a credential.
func (s *SMTP) String() string { return s.server }

// Send sends m to one person in one SMTP transaction of its own.
func (s *SMTP) Send(ctx context.Context, to *netmail.Address, m Message) error {
	msg := s.message(to, m)
	c, err := s.client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotSent, s.server, err)
	}
	err = s.client.SendWithSMTPClient(c, msg)
	// QUIT after the message was taken changes nothing.
	_ = s.client.CloseWithSMTPClient(c)
	return classify(s.server, err)
}

// classify tells a failed transaction that provably did not deliver (it
// stopped before the end of the message was sent, or the server answered
// it with a refusal) from one that may have.
func classify(server string, err error) error {
	if err == nil {
		return nil
	}
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return fmt.Errorf("%w: %s: %v", ErrMaybeSent, server, err)
	}
	switch se.Reason {
	case gomail.ErrSMTPReset:
		return nil // the message was taken; only the RSET after it failed
	case gomail.ErrSMTPDataClose, gomail.ErrAmbiguous:
		if se.ErrorCode() >= 400 { // the server answered: refused
			return fmt.Errorf("%w: %s: %v", ErrNotSent, server, err)
		}
		return fmt.Errorf("%w: %s: %v", ErrMaybeSent, server, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrNotSent, server, err)
}

// message builds the MIME message: plain text with an HTML alternative.
func (s *SMTP) message(to *netmail.Address, m Message) *gomail.Msg {
	msg := gomail.NewMsg()
	msg.FromMailAddress(s.from)
	msg.ToMailAddress(to)
	msg.Subject(m.Subject)
	msg.SetMessageID()
	msg.SetDate()
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated") // RFC 3834: no auto-replies
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg
}
