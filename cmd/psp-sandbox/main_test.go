package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// logs collects what the command logs and sends the address it listens on
// (the "addr" of its first log line that has one) to addr.
type logs struct {
	mu   sync.Mutex
	b    bytes.Buffer
	addr chan string
	sent bool
}

var addrField = regexp.MustCompile(`"addr":"([^"]+)"`)

func newLogs() *logs { return &logs{addr: make(chan string, 1)} }

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if m := addrField.FindSubmatch(l.b.Bytes()); m != nil && !l.sent {
		l.sent = true
		l.addr <- string(m[1])
	}
	return len(p), nil
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{[]string{"--nope"}, nil, 2, "flag provided but not defined"},
		{[]string{"--p-ambiguous", "1.5"}, nil, 2, "p-ambiguous"},
		{[]string{"extra"}, nil, 2, "unexpected argument"},
		{[]string{"--log-level", "loud"}, nil, 2, "--log-level"},
		{[]string{"--latency", "-1s"}, nil, 2, "negative"},
		{[]string{"--p-h2-reset", "2"}, nil, 2, "p-h2-reset"},
		{[]string{"--tls-cert", "x.pem"}, nil, 2, "--tls-key"},
		{[]string{"--tls-generate"}, nil, 2, "--tls-cert"},
		{nil, map[string]string{"PAYOUT_SANDBOX_P_REFUSE": "lots"}, 2, "PAYOUT_SANDBOX_P_REFUSE"},
		{nil, map[string]string{"PAYOUT_SANDBOX_TOKEN": "  "}, 2, "token"},
		{[]string{"--p-fail", "0.2"}, nil, 2, "p-fail needs settle-after"},
		{[]string{"--settle-after", "1s", "--callback-url", "http://127.0.0.1:1/cb"}, nil, 2, "callback-secret"},
		{[]string{"--settle-after", "1s", "--paid-status", "Created"}, nil, 2, "must not be"},
		{nil, map[string]string{"PAYOUT_SANDBOX_P_CALLBACK_DUP": "2"}, 2, "PAYOUT_SANDBOX_P_CALLBACK_DUP"},
		{[]string{"--reject-above", "1,5"}, nil, 2, "reject-above"},
		{[]string{"-h"}, nil, 0, "PAYOUT_SANDBOX_REJECT_ABOVE"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, io.Discard, &stderr, env(tc.env))
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d and %q", tc.args, tc.env, code, stderr.String(), tc.code, tc.msg)
		}
	}
}

func TestListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--addr", ln.Addr().String()}, io.Discard, &stderr, env(nil)); code != 2 {
		t.Errorf("address in use: exit %d (%s)", code, stderr.String())
	}
}

// start runs the command with args and environment getenv until ctx ends
// and waits for the address it listens on; its exit code goes to done.
func start(ctx context.Context, t *testing.T, args []string, getenv func(string) string) (addr string, out *logs, done <-chan int) {
	t.Helper()
	exit := make(chan int, 1)
	out = newLogs()
	go func() {
		exit <- run(ctx, args, io.Discard, out, getenv)
	}()
	select {
	case addr = <-out.addr:
	case code := <-exit:
		t.Fatalf("exited %d", code)
	case <-time.After(5 * time.Second):
		t.Fatal("not ready")
	}
	return addr, out, exit
}

// TestRunServesAndStops starts the command on a free port with settings
// from the environment, checks that it answers, then stops it as SIGTERM
// would (by cancelling its context).
func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e := env(map[string]string{
		"PAYOUT_SANDBOX_ADDR":  "127.0.0.1:0",
		"PAYOUT_SANDBOX_TOKEN": "env-token",
		"PAYOUT_SANDBOX_SEED":  "5",
	})
	addr, out, done := start(ctx, t, []string{"--seed", "6"}, e)
	resp, err := http.Get("http://" + addr + "/sandbox/stats")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"seed":6`) {
		t.Errorf("flag should win over env: %s", body)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/integration/bridge/withdrawal-order/x", nil)
	req.Header.Set("Authorization", "Bearer env-token")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("token from env not used: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
	if l := out.String(); !strings.Contains(l, `"message":"psp sandbox listening"`) || strings.Contains(l, "env-token") {
		t.Errorf("logs: %s", l)
	}
}

// TestCallbackSecretFromEnv: the callback secret comes from
// PAYOUT_SANDBOX_CALLBACK_SECRET, is sent in X-Callback-Secret, and is
// never logged, even at debug level.
func TestCallbackSecretFromEnv(t *testing.T) {
	const secret = "env-CALLBACK-secret-77"
	got := make(chan string, 4)
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("X-Callback-Secret"):
		default:
		}
	}))
	defer rs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	e := env(map[string]string{"PAYOUT_SANDBOX_CALLBACK_SECRET": secret, "PAYOUT_SANDBOX_CALLBACK_URL": rs.URL})
	addr, out, done := start(ctx, t, []string{"--addr", "127.0.0.1:0", "--settle-after", "20ms", "--log-level", "debug"}, e)
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/integration/bridge/withdrawal-order",
		strings.NewReader(`{"externalId":"E1","amount":"1.00","properties":[{"key":"cardNumber","value":"4111111111111111"}]}`))
	req.Header.Set("Authorization", "Bearer sandbox-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case h := <-got:
		if h != secret {
			t.Errorf("X-Callback-Secret %q", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no callback")
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	if l := out.String(); strings.Contains(l, secret) || !strings.Contains(l, `"lifecycle"`) {
		t.Errorf("logs: %s", l)
	}
}
