// Package smtptest runs a real SMTP server for tests: Debian's
// python3-aiosmtpd on a free loopback port, writing every message it takes
// to a directory, and reads those messages back (plain text and HTML parts
// decoded). A missing python3-aiosmtpd fails under CI=true and skips
// elsewhere (testenv.Missing).
package smtptest

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
)

//go:embed smtpd.py
var script []byte

// Server is a running SMTP server.
type Server struct {
	Host string
	Port int
	dir  string
}

// Start runs the server for the test's duration.
func Start(t testing.TB) *Server {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "smtpd.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	port := testenv.Port(t)
	p := proc.StartT(t, proc.Spec{Name: "aiosmtpd", Bin: py, Args: []string{path, strconv.Itoa(port), spool}, Log: filepath.Join(dir, "smtpd.log")})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testenv.Eventually(t, "the SMTP server listening on "+addr, func() bool {
		if p.Exited() {
			t.Fatalf("aiosmtpd exited: %s", p.Tail(20))
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return &Server{Host: "127.0.0.1", Port: port, dir: spool}
}

// python is a python3 that imports aiosmtpd: the one in PATH, else
// Debian's (/usr/bin/python3, where python3-aiosmtpd installs it, when
// PATH leads to another python first, e.g. pyenv's).
func python(t testing.TB) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import aiosmtpd").Run() == nil {
			return path
		}
		tried = append(tried, path)
	}
	testenv.Missing(t, fmt.Sprintf("no python3 that imports aiosmtpd (tried %v; apt-get install -y python3-aiosmtpd)", tried))
	return ""
}

// URL is the server's smtp:// URL (plain: it has no TLS).
func (s *Server) URL() string { return fmt.Sprintf("smtp://%s:%d", s.Host, s.Port) }

// Message is one message the server took.
type Message struct {
	To      []string // the envelope's recipients
	From    string
	Subject string
	Header  netmail.Header
	Text    string // the text/plain part, decoded, with LF line ends
	HTML    string // the text/html part, decoded, with LF line ends
	Raw     string
}

// Messages returns every message taken so far, oldest first.
func (s *Server) Messages(t testing.TB) []Message {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.dir, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []Message
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out = append(out, m)
	}
	return out
}

// Parse reads one message as the server wrote it.
func Parse(raw []byte) (Message, error) {
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return Message{}, err
	}
	m := Message{From: msg.Header.Get("From"), Subject: subject, Header: msg.Header, Raw: string(raw)}
	if to := msg.Header.Get("X-Rcpt-To"); to != "" {
		m.To = strings.Split(to, ",")
	}
	err = m.readParts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	return m, err
}

// readParts keeps the text/plain and text/html parts of a body.
func (m *Message) readParts(contentType, encoding string, body io.Reader) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		r := multipart.NewReader(body, params["boundary"])
		for {
			p, err := r.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := m.readParts(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err != nil {
				return err
			}
		}
	}
	if strings.EqualFold(encoding, "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	text := strings.ReplaceAll(string(b), "\r\n", "\n") // SMTP's line ends
	switch mt {
	case "text/plain":
		m.Text = text
	case "text/html":
		m.HTML = text
	}
	return nil
}

// Wait polls until at least n messages were taken (or fails the test after
// within) and returns them.
func (s *Server) Wait(t testing.TB, n int, within time.Duration) []Message {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ms := s.Messages(t)
		if len(ms) >= n {
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SMTP server took %d messages in %s, want %d", len(ms), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
