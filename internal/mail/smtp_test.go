package mail

import (
	"context"
	"errors"
	"net"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/smtptest"
)

func TestNewSMTPRefuses(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  SMTPConfig
		want string // in the error; "" accepted
	}{
		{"starttls", SMTPConfig{URL: "smtp://mail.example.com", From: "payout@example.com"}, ""},
		{"tls with auth", SMTPConfig{URL: "smtps://payout@mail.example.com", PasswordFile: pw, From: "payout@example.com"}, ""},
		{"password in URL", SMTPConfig{URL: "smtp://u:s3cret@mail.example.com", From: "payout@example.com"}, "--smtp-password-file"},
		{"plain to a remote host", SMTPConfig{URL: "smtp://mail.example.com", AllowPlain: true, From: "payout@example.com"}, "loopback"},
		{"other scheme", SMTPConfig{URL: "http://mail.example.com", From: "payout@example.com"}, "scheme"},
		{"user without password", SMTPConfig{URL: "smtp://u@mail.example.com", From: "payout@example.com"}, "no --smtp-password-file"},
		{"password without user", SMTPConfig{URL: "smtp://mail.example.com", PasswordFile: pw, From: "payout@example.com"}, "without a user"},
		{"bad from", SMTPConfig{URL: "smtp://mail.example.com", From: "payout"}, "--mail-from"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSMTP(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(s.String(), "s3cret") || strings.Contains(s.String(), "payout@") {
					t.Fatalf("String() shows a credential: %s", s)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrSMTPConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the password in an error: %v", err)
			}
		})
	}
}

// TestSMTPSendsToARealServer: a message through a real SMTP server
// (python3-aiosmtpd) arrives as text with an HTML alternative.
func TestSMTPSendsToARealServer(t *testing.T) {
	srv := smtptest.Start(t)
	s, err := NewSMTP(SMTPConfig{URL: srv.URL(), AllowPlain: true, From: "payout <payout@example.com>", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := RenderApproval(approvalFixture())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), &netmail.Address{Name: "Ann", Address: "ann@example.com"}, msg); err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(t, 1, 5*time.Second)[0]
	if got.Subject != msg.Subject || got.Text != msg.Text || !strings.Contains(got.HTML, "1250.50") ||
		got.Header.Get("Auto-Submitted") != "auto-generated" || strings.Join(got.To, ",") != "ann@example.com" {
		t.Fatalf("got %+v", got)
	}
	if strings.Contains(got.Raw, fullCard) {
		t.Fatal("a full card number on the wire")
	}
}

// TestSMTPDownIsNotSent: nothing listening, or a server that never
// answers, is a send that provably failed (retried), within the timeout.
func TestSMTPDownIsNotSent(t *testing.T) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never answered
		}
	}()
	for _, addr := range []string{testenv.ClosedAddr(t), hang.Addr().String()} {
		s, err := NewSMTP(SMTPConfig{URL: "smtp://" + addr, AllowPlain: true, From: "payout@example.com", Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = s.Send(context.Background(), &netmail.Address{Address: "ann@example.com"}, Message{Subject: "x", Text: "x"})
		if !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: %v, want ErrNotSent", addr, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %s", addr, d)
		}
	}
}
