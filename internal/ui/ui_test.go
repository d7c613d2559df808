package ui

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/golden"
	"github.com/acme/payout/internal/proof/testlog"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

const (
	testUser  = "operator"
	testPass  = "s3cret-Pa55word"
	testToken = "tok-0123456789abcdef"
	fullPAN   = "4111111111111111"
	maskedPAN = "411111******1111"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

type fixture struct {
	h    http.Handler
	mr   *miniredis.Miniredis
	rc   redis.UniversalClient
	logs *syncBuffer
	now  *time.Time
}

// newFixture builds the UI against a fresh miniredis with basic auth and a
// token, letting mutate adjust the config.
func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	logs := &syncBuffer{}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f := &fixture{mr: mr, rc: rc, logs: logs, now: &now}
	cfg := Config{
		Redis:    rc,
		User:     testUser,
		Password: testPass,
		Token:    testToken,
		Logger:   zerolog.New(logs).Level(zerolog.DebugLevel),
		Registry: prometheus.NewRegistry(),
		Batches:  fakeBatches{},
		clock:    func() time.Time { return *f.now },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.h = h
	return f
}

type reqOpt func(*http.Request)

func basic(u, p string) reqOpt { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
func bearer(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}
func fromIP(ip string) reqOpt { return func(r *http.Request) { r.RemoteAddr = ip + ":40000" } }
func header(k, v string) reqOpt {
	return func(r *http.Request) { r.Header.Set(k, v) }
}

func (f *fixture) do(t *testing.T, method, path string, opts ...reqOpt) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:40000"
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func TestAuth(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name      string
		path      string
		opts      []reqOpt
		want      int
		challenge bool
	}{
		{"no credentials", "/batches", nil, 401, true},
		{"wrong password", "/batches", []reqOpt{basic(testUser, "wrong")}, 401, true},
		{"wrong user", "/batches", []reqOpt{basic("root", testPass)}, 401, true},
		{"right basic", "/batches", []reqOpt{basic(testUser, testPass)}, 200, false},
		{"right bearer", "/batches", []reqOpt{bearer(testToken)}, 200, false},
		{"bearer lower-case scheme", "/batches", []reqOpt{header("Authorization", "bearer "+testToken)}, 200, false},
		{"wrong bearer", "/batches", []reqOpt{bearer(testToken + "x")}, 401, true},
		{"empty bearer", "/batches", []reqOpt{header("Authorization", "Bearer ")}, 401, true},
		{"token as basic password", "/batches", []reqOpt{basic(testUser, testToken)}, 401, true},
		{"unsupported scheme", "/batches", []reqOpt{header("Authorization", "Digest x")}, 401, true},
		{"monitoring needs auth", "/monitoring/", nil, 401, true},
		{"asynqmon api needs auth", "/monitoring/api/queues", nil, 401, true},
		{"metrics needs auth", "/metrics", nil, 401, true},
		{"metrics with auth", "/metrics", []reqOpt{basic(testUser, testPass)}, 200, false},
		{"root needs auth", "/", nil, 401, true},
		{"healthz is open", "/healthz", nil, 200, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A distinct IP per case keeps the lockout out of this test.
			opts := append([]reqOpt{fromIP("198.51.100." + strconv.Itoa(i+1))}, tc.opts...)
			w := f.do(t, "GET", tc.path, opts...)
			if w.Code != tc.want {
				t.Fatalf("GET %s: status %d, want %d (body %q)", tc.path, w.Code, tc.want, w.Body.String())
			}
			got := w.Header().Get("WWW-Authenticate")
			if tc.challenge && got != `Basic realm="payout"` {
				t.Errorf("WWW-Authenticate = %q, want Basic realm=\"payout\"", got)
			}
			if !tc.challenge && got != "" {
				t.Errorf("unexpected WWW-Authenticate %q", got)
			}
		})
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"level":"warn"`) || !strings.Contains(logs, "failed login") {
		t.Errorf("failed logins not logged at warn:\n%s", logs)
	}
	for _, secret := range []string{"wrong", testToken + "x", testToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("log holds a submitted secret %q:\n%s", secret, logs)
		}
	}
	// The login's own name is logged with a wrong password; another name
	// is not (it may be a password typed into the name field).
	if !strings.Contains(logs, `"user":"`+testUser+`"`) || !strings.Contains(logs, `"user_known":false`) {
		t.Errorf("failed login log lacks the login's name or user_known:\n%s", logs)
	}
	if strings.Contains(logs, "root") {
		t.Errorf("failed login log names a user that is not the login's:\n%s", logs)
	}
}

func TestTokenOnlyChallengesBearer(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.User, c.Password = "", "" })
	w := f.do(t, "GET", "/batches")
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Bearer realm="payout"` {
		t.Fatalf("status %d, WWW-Authenticate %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if w := f.do(t, "GET", "/batches", basic(testUser, testPass)); w.Code != 401 {
		t.Fatalf("basic auth accepted while not configured: %d", w.Code)
	}
	if w := f.do(t, "GET", "/batches", bearer(testToken)); w.Code != 200 {
		t.Fatalf("bearer: %d", w.Code)
	}
}

func TestLockout(t *testing.T) {
	f := newFixture(t, nil)
	attacker, other := fromIP("203.0.113.7"), fromIP("203.0.113.8")
	for i := 1; i <= 5; i++ {
		if w := f.do(t, "GET", "/batches", attacker, basic(testUser, "guess")); w.Code != 401 {
			t.Fatalf("failure %d: status %d, want 401", i, w.Code)
		}
	}
	// Locked out now, even with the right password.
	w := f.do(t, "GET", "/batches", attacker, basic(testUser, testPass))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("after 5 failures: status %d, want 429", w.Code)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" {
		t.Error("429 without Retry-After")
	}
	if w.Header().Get("X-Frame-Options") != "DENY" {
		t.Error("429 without security headers")
	}
	// Another client is not affected.
	if w := f.do(t, "GET", "/batches", other, basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("other IP: status %d, want 200", w.Code)
	}
	// healthz stays open for the locked-out IP (monitoring probes).
	if w := f.do(t, "GET", "/healthz", attacker); w.Code != 200 {
		t.Fatalf("healthz for locked IP: %d", w.Code)
	}
	if !strings.Contains(f.logs.String(), "locked out") {
		t.Error("lockout not logged")
	}
	// After the lockout, the right password works again.
	*f.now = f.now.Add(5*time.Minute + time.Second)
	if w := f.do(t, "GET", "/batches", attacker, basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("after lockout: status %d, want 200", w.Code)
	}
}

func TestFailuresOutsideWindowDoNotLock(t *testing.T) {
	f := newFixture(t, nil)
	ip := fromIP("203.0.113.9")
	for i := 0; i < 8; i++ {
		if w := f.do(t, "GET", "/batches", ip, basic(testUser, "guess")); w.Code != 401 {
			t.Fatalf("failure %d: status %d, want 401 (4 per minute must not lock)", i, w.Code)
		}
		if i%4 == 3 {
			*f.now = f.now.Add(61 * time.Second)
		}
	}
	// Missing credentials (a browser's first request) never count.
	for i := 0; i < 10; i++ {
		if w := f.do(t, "GET", "/batches", ip); w.Code != 401 {
			t.Fatalf("no creds %d: %d", i, w.Code)
		}
	}
	if w := f.do(t, "GET", "/batches", ip, basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("status %d, want 200", w.Code)
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, nil)
	auth := basic(testUser, testPass)
	tests := []struct {
		path    string
		opts    []reqOpt
		code    int
		noStore bool
	}{
		{"/", []reqOpt{auth}, http.StatusFound, true},
		{"/", nil, http.StatusUnauthorized, true},
		{"/monitoring/", []reqOpt{auth}, 200, true},
		{"/monitoring/queues/payouts", []reqOpt{auth}, 200, true},
		{"/monitoring/api/queues", []reqOpt{auth}, 200, true},
		{"/batches", []reqOpt{auth}, 200, true},
		{"/api/batches", []reqOpt{auth}, 200, true},
		{"/healthz", nil, 200, true},
		{"/monitoring/static/js/main.5adda2da.chunk.js", []reqOpt{auth}, 200, false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			w := f.do(t, "GET", tc.path, tc.opts...)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d", w.Code, tc.code)
			}
			h := w.Header()
			for k, want := range map[string]string{
				"X-Frame-Options":        "DENY",
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "no-referrer",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			csp := h.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'none'", "script-src 'self' 'nonce-", "style-src 'self' 'nonce-", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, d) {
					t.Errorf("CSP %q lacks %q", csp, d)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("CSP allows unsafe sources: %q", csp)
			}
			if got := h.Get("Cache-Control") == "no-store"; got != tc.noStore {
				t.Errorf("Cache-Control = %q, want no-store=%v", h.Get("Cache-Control"), tc.noStore)
			}
		})
	}
	if w := f.do(t, "GET", "/", auth); w.Header().Get("Location") != "/batches" {
		t.Errorf("/ redirects to %q", w.Header().Get("Location"))
	}
}

var nonceAttr = regexp.MustCompile(`'nonce-([^']+)'`)

func TestMonitoringIndexRewritten(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, "GET", "/monitoring/queues", basic(testUser, testPass))
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	m := nonceAttr.FindStringSubmatch(w.Header().Get("Content-Security-Policy"))
	if m == nil {
		t.Fatal("no nonce in CSP")
	}
	body := w.Body.String()
	if !strings.Contains(body, `<meta property="csp-nonce" content="`+m[1]+`"/>`) {
		t.Error("index lacks the csp-nonce meta with the response's nonce")
	}
	if n := strings.Count(body, `<script nonce="`+m[1]+`">`); n != 2 {
		t.Errorf("%d inline scripts tagged with the nonce, want 2", n)
	}
	if strings.Contains(body, "<script>") {
		t.Error("an inline script lacks the nonce")
	}
	if strings.Contains(body, "googleapis") {
		t.Error("index still loads stylesheets from another host")
	}
	if !strings.Contains(body, `window.FLAG_ROOT_PATH="\/monitoring"`) && !strings.Contains(body, `window.FLAG_ROOT_PATH="/monitoring"`) {
		t.Errorf("index not rendered with the root path:\n%.600s", body)
	}
	// A second response gets a different nonce.
	w2 := f.do(t, "GET", "/monitoring/queues", basic(testUser, testPass))
	if m2 := nonceAttr.FindStringSubmatch(w2.Header().Get("Content-Security-Policy")); m2 == nil || m2[1] == m[1] {
		t.Error("nonce reused across responses")
	}
}

func TestReadOnlyGuard(t *testing.T) {
	auth := basic(testUser, testPass)
	for _, ro := range []bool{true, false} {
		t.Run(map[bool]string{true: "read-only", false: "read-write"}[ro], func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.ReadOnly = ro })
			enqueue(t, f.rc, jobs.Queue, "withdrawal:create", []byte(`{"x":1}`))
			w := f.do(t, "POST", "/monitoring/api/queues/payouts:pause", auth)
			paused := isPaused(t, f.rc, jobs.Queue)
			if ro {
				if w.Code != http.StatusForbidden || paused {
					t.Fatalf("read-only: status %d paused %v, want 403 and not paused", w.Code, paused)
				}
				for _, m := range []string{"DELETE", "PUT", "PATCH"} {
					if w := f.do(t, m, "/monitoring/api/queues/payouts", auth); w.Code != http.StatusForbidden {
						t.Errorf("%s: %d, want 403", m, w.Code)
					}
				}
				if w := f.do(t, "GET", "/monitoring/api/queues", auth); w.Code != 200 {
					t.Errorf("GET in read-only: %d", w.Code)
				}
			} else if w.Code >= 300 || !paused {
				t.Fatalf("read-write: status %d paused %v, want 2xx and paused (body %q)", w.Code, paused, w.Body.String())
			}
		})
	}
}

func TestCrossSiteChangeRefused(t *testing.T) {
	f := newFixture(t, nil)
	enqueue(t, f.rc, jobs.Queue, "withdrawal:create", []byte(`{"x":1}`))
	w := f.do(t, "POST", "/monitoring/api/queues/payouts:pause", basic(testUser, testPass),
		header("Sec-Fetch-Site", "cross-site"), header("Origin", "https://evil.example"))
	if w.Code != http.StatusForbidden || isPaused(t, f.rc, jobs.Queue) {
		t.Fatalf("cross-site POST: status %d, paused %v", w.Code, isPaused(t, f.rc, jobs.Queue))
	}
}

func enqueue(t *testing.T, rc redis.UniversalClient, queue, typ string, payload []byte, opts ...asynq.Option) *asynq.TaskInfo {
	t.Helper()
	c := asynq.NewClientFromRedisClient(rc)
	info, err := c.Enqueue(asynq.NewTask(typ, payload), append([]asynq.Option{asynq.Queue(queue)}, opts...)...)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return info
}

func isPaused(t *testing.T, rc redis.UniversalClient, queue string) bool {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rc).GetQueueInfo(queue)
	if err != nil {
		t.Fatalf("queue info: %v", err)
	}
	return info.Paused
}

func TestPayloadMasked(t *testing.T) {
	f := newFixture(t, nil)
	p := jobs.CreatePayload{Batch: "b1", ExternalID: "ext-1", Attempt: 1, Amount: "10.00", Destination: "card " + maskedPAN}
	if _, err := queue.New(f.rc).Add(context.Background(), queue.Step{Kind: queue.Create, Batch: p.Batch, ExternalID: p.ExternalID, N: p.Attempt, Amount: p.Amount, Destination: p.Destination}); err != nil {
		t.Fatal(err)
	}
	rogue := enqueue(t, f.rc, jobs.Queue, "rogue:task", []byte(`{"pan":"`+fullPAN+`","spaced":"4111 1111 1111 1111"}`))
	auth := basic(testUser, testPass)

	for _, path := range []string{
		"/monitoring/api/queues/payouts/pending_tasks",
		"/monitoring/api/queues/payouts/tasks/" + rogue.ID,
	} {
		w := f.do(t, "GET", path, auth)
		body := w.Body.String()
		if w.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, w.Code, body)
		}
		if strings.Contains(body, fullPAN) || strings.Contains(body, "4111 1111 1111 1111") {
			t.Errorf("GET %s shows a full card number: %s", path, body)
		}
		if !strings.Contains(body, maskedPAN) {
			t.Errorf("GET %s lacks the masked number: %s", path, body)
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q", path, w.Header().Get("Cache-Control"))
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Errorf("GET %s: body is not JSON", path)
		}
	}
}

func TestErrorMessageScrubbed(t *testing.T) {
	in := []byte(`{"tasks":[{"id":"create:123456789012345:1","error_message":"card 4111111111111111 refused \u0026 x","payload":"p"},` +
		`{"error_message": "amp\u00264111111111111111"},{"error_message":""}]}`)
	out := string(scrubErrorMessages(in))
	if strings.Contains(out, fullPAN) {
		t.Errorf("full number left: %s", out)
	}
	if !strings.Contains(out, `"id":"create:123456789012345:1"`) {
		t.Errorf("task ID changed: %s", out)
	}
	if strings.Count(out, maskedPAN) != 2 {
		t.Errorf("want 2 masked numbers: %s", out)
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("invalid JSON: %s", out)
	}
}

type fakeBatches struct{ err error }

func (f fakeBatches) Batches(context.Context) ([]BatchView, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []BatchView{
		{
			ID: "b-old", File: "payouts-2025-02-27.csv", LoadedAt: time.Date(2025, 2, 27, 9, 30, 0, 0, time.UTC),
			Counts: map[string]int64{"created": 3, "rejected": 1}, Rows: 4,
			AmountCreated: "300.00", AmountTotal: "400.00",
		},
		{
			ID: "b-new", File: "payouts <march>.csv", LoadedAt: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC),
			Counts:   map[string]int64{"queued": 2, "submitting": 1, "checking": 1, "created": 4, "paid": 2, "failed": 1, "rejected": 1, "needs_review": 1},
			Awaiting: 3, Rows: 13, AmountCreated: "1234.50", AmountPaid: "700.00", AmountFailed: "65.50", AmountAwaiting: "934.50", AmountTotal: "5000.00",
		},
	}, nil
}

func TestBatchesPageGolden(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, "GET", "/batches", basic(testUser, testPass))
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	m := nonceAttr.FindStringSubmatch(w.Header().Get("Content-Security-Policy"))
	if m == nil || !strings.Contains(w.Body.String(), `<style nonce="`+m[1]+`">`) {
		t.Fatal("page style not tagged with the response's nonce")
	}
	got := strings.ReplaceAll(w.Body.String(), m[1], "NONCE")
	golden.CheckString(t, filepath.Join("testdata", "batches.golden.html"), got)
}

func TestBatchesJSONGolden(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, "GET", "/api/batches", bearer(testToken))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	var v batchesJSON
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Batches) != 2 || v.Batches[0].ID != "b-new" || v.Batches[0].Counts["needs_review"] != 1 ||
		v.Batches[0].Counts["paid"] != 2 || v.Batches[0].Counts["failed"] != 1 || v.Batches[0].Awaiting != 3 || v.Batches[0].AmountPaid != "700.00" {
		t.Fatalf("unexpected batches: %+v", v.Batches)
	}
	golden.CheckString(t, filepath.Join("testdata", "batches.golden.json"), w.Body.String())
}

func TestBatchesUnavailable(t *testing.T) {
	for name, src := range map[string]BatchSource{"error": fakeBatches{err: errors.New("ledger: redis: secret internals")}, "none": nil} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Batches = src })
			for _, p := range []string{"/batches", "/api/batches"} {
				w := f.do(t, "GET", p, basic(testUser, testPass))
				if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "internals") {
					t.Errorf("%s: status %d body %q", p, w.Code, w.Body.String())
				}
			}
		})
	}
}

func TestEmptyBatchesPage(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Batches = emptyBatches{} })
	w := f.do(t, "GET", "/batches", basic(testUser, testPass))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "No batches loaded.") {
		t.Fatalf("status %d body %q", w.Code, w.Body.String())
	}
}

type emptyBatches struct{}

func (emptyBatches) Batches(context.Context) ([]BatchView, error) { return nil, nil }

func TestHealthzReportsRedis(t *testing.T) {
	f := newFixture(t, nil)
	if w := f.do(t, "GET", "/healthz"); w.Code != 200 || w.Body.String() != "ok\n" {
		t.Fatalf("healthz: %d %q", w.Code, w.Body.String())
	}
	f.mr.Close()
	if w := f.do(t, "GET", "/healthz"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("healthz with Redis down: %d", w.Code)
	}
}

func TestMetricsServesRegistry(t *testing.T) {
	f := newFixture(t, nil)
	f.do(t, "GET", "/batches", fromIP("192.0.2.50"), basic(testUser, "nope"))
	w := f.do(t, "GET", "/metrics", basic(testUser, testPass))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `payout_ui_login_failures_total{scheme="basic"} 1`) {
		t.Fatalf("metrics: %d\n%s", w.Code, w.Body.String())
	}
}

func TestCheckConfig(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rc.Close() })
	users := testUsers(t)
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no creds on 0.0.0.0", Config{Redis: rc, Addr: "0.0.0.0:8080"}, ErrNoCredentials},
		{"no creds, insecure flag, 0.0.0.0", Config{Redis: rc, Addr: "0.0.0.0:8080", InsecureLocal: true}, ErrNotLoopback},
		{"no creds, insecure flag, all interfaces", Config{Redis: rc, Addr: ":8080", InsecureLocal: true}, ErrNotLoopback},
		{"no creds, insecure flag, a LAN address", Config{Redis: rc, Addr: "192.168.1.5:8080", InsecureLocal: true}, ErrNotLoopback},
		{"no creds, insecure flag, a host name", Config{Redis: rc, Addr: "ui.internal:8080", InsecureLocal: true}, ErrNotLoopback},
		{"no creds, 127.0.0.1, insecure flag", Config{Redis: rc, Addr: "127.0.0.1:8080", InsecureLocal: true}, nil},
		{"no creds, 127.0.0.2, insecure flag", Config{Redis: rc, Addr: "127.0.0.2:8080", InsecureLocal: true}, nil},
		{"no creds, ::1, insecure flag", Config{Redis: rc, Addr: "[::1]:8080", InsecureLocal: true}, nil},
		{"no creds, localhost, insecure flag", Config{Redis: rc, Addr: "localhost:8080", InsecureLocal: true}, nil},
		{"no creds, default addr, insecure flag", Config{Redis: rc, InsecureLocal: true}, nil},
		{"no creds, 127.0.0.1, no flag", Config{Redis: rc, Addr: "127.0.0.1:8080"}, ErrNoCredentials},
		{"user without password", Config{Redis: rc, Addr: "127.0.0.1:8080", User: "u", InsecureLocal: true}, ErrIncompleteCredentials},
		{"password without user", Config{Redis: rc, Addr: "0.0.0.0:8080", Password: "p", Token: "t"}, ErrIncompleteCredentials},
		{"basic on 0.0.0.0", Config{Redis: rc, Addr: "0.0.0.0:8080", User: "u", Password: "p"}, nil},
		{"token on 0.0.0.0", Config{Redis: rc, Addr: "0.0.0.0:8080", Token: "t"}, nil},
		{"bad address", Config{Redis: rc, Addr: "127.0.0.1", Token: "t"}, ErrBadAddr},
		{"no redis", Config{Addr: "127.0.0.1:8080", Token: "t"}, ErrNoRedis},
		{"negative limit", Config{Redis: rc, Token: "t", MaxFailures: -1}, ErrBadLimits},
		{"four-eyes, basic", Config{Redis: rc, User: "u", Password: "p", FourEyes: true}, nil},
		{"four-eyes, token only", Config{Redis: rc, Token: "t", FourEyes: true}, ErrFourEyesLogin},
		{"four-eyes, basic and token", Config{Redis: rc, User: "u", Password: "p", Token: "t", FourEyes: true}, ErrFourEyesLogin},
		{"four-eyes, insecure local", Config{Redis: rc, InsecureLocal: true, FourEyes: true}, ErrFourEyesLogin},
		{"four-eyes, basic and insecure local", Config{Redis: rc, User: "u", Password: "p", InsecureLocal: true, FourEyes: true}, ErrFourEyesLogin},
		{"four-eyes, read-only, token", Config{Redis: rc, Token: "t", FourEyes: true, ReadOnly: true}, nil},
		{"users file on 0.0.0.0", Config{Redis: rc, Addr: "0.0.0.0:8080", Users: users}, nil},
		{"users file and token", Config{Redis: rc, Users: users, Token: "t"}, nil},
		{"users file and user", Config{Redis: rc, Users: users, User: "u", Password: "p"}, ErrUsersAndUser},
		{"users file and a lone password", Config{Redis: rc, Users: users, Password: "p"}, ErrUsersAndUser},
		{"users file without users", Config{Redis: rc, Users: &Users{}}, ErrUsersFile},
		{"four-eyes, users file", Config{Redis: rc, Users: users, FourEyes: true}, nil},
		{"four-eyes, users file and token", Config{Redis: rc, Users: users, Token: "t", FourEyes: true}, ErrFourEyesLogin},
		{"four-eyes, users file, insecure local", Config{Redis: rc, Users: users, InsecureLocal: true, FourEyes: true}, ErrFourEyesLogin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckConfig(tc.cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v, want %v matching ErrConfig", err, tc.want)
			}
			if _, nerr := New(tc.cfg); !errors.Is(nerr, tc.want) {
				t.Fatalf("New accepted a bad config: %v", nerr)
			}
		})
	}
}

func TestInsecureLocalServesOnlyLoopbackHosts(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.User, c.Password, c.Token = "", "", ""
		c.InsecureLocal, c.Addr = true, "127.0.0.1:0"
	})
	r := httptest.NewRequest("GET", "http://127.0.0.1:8089/batches", nil)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("loopback host without creds: %d", w.Code)
	}
	r = httptest.NewRequest("GET", "http://rebound.example:8089/batches", nil)
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusMisdirectedRequest {
		t.Fatalf("foreign host (DNS rebinding) without creds: %d, want 421", w.Code)
	}
}

func TestServeGracefulShutdown(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	// Find a free port, then serve on it.
	l := httptest.NewServer(http.NotFoundHandler())
	addr := l.Listener.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Redis: rc, Addr: addr, User: testUser, Password: testPass, Registry: prometheus.NewRegistry(), Logger: zerolog.Nop()})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/monitoring/api/queues", nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(testUser+":"+testPass)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("api over TCP: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	// The caller's Redis client is still usable: the UI never closes it.
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("caller's Redis client closed: %v", err)
	}
}

func TestServeRefusesBadConfigAndDeadRedis(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	err := Serve(context.Background(), Config{Redis: rc, Addr: "0.0.0.0:0"})
	if !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no creds: %v", err)
	}
	err = Serve(context.Background(), Config{Redis: rc, Addr: "127.0.0.1:0", Token: "t", Registry: prometheus.NewRegistry()})
	if !errors.Is(err, ErrRedisUnavailable) || errors.Is(err, ErrConfig) {
		t.Fatalf("dead redis: %v", err)
	}
}

func TestPrometheusAddressPassedToAsynqmon(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Path+"?"+r.URL.Query().Get("query"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	}))
	t.Cleanup(prom.Close)
	f := newFixture(t, func(c *Config) { c.PrometheusAddr = prom.URL })
	auth := basic(testUser, testPass)

	w := f.do(t, "GET", "/monitoring/", auth)
	escaped := strings.ReplaceAll(prom.URL, "/", `\/`)
	if body := w.Body.String(); !strings.Contains(body, prom.URL) && !strings.Contains(body, escaped) {
		t.Errorf("index does not announce the Prometheus address to the UI:\n%.700s", body)
	}
	w = f.do(t, "GET", "/monitoring/api/metrics?duration_sec=3600", auth)
	if w.Code != 200 {
		t.Fatalf("metrics API: %d %s", w.Code, w.Body.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) == 0 || !strings.HasPrefix(queries[0], "/api/v1/query_range?") {
		t.Fatalf("Prometheus was not queried: %v", queries)
	}
}

// TestWebUIChangesLogged: a task deleted in the Asynq web UI leaves an info
// line naming who deleted it (the PayoutRepairsFrequent runbook asks who
// deleted or archived tasks); a read leaves none.
func TestWebUIChangesLogged(t *testing.T) {
	const msg = "ui: change made in the Asynq web UI"
	for _, c := range []struct {
		name, method, path string
		want               bool
	}{
		{"read", "GET", "/monitoring/api/queues/payouts/pending_tasks", false},
		{"delete", "DELETE", "/monitoring/api/queues/payouts/pending_tasks/ID", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Logger = c.Logger.Level(zerolog.InfoLevel) })
			info := enqueue(t, f.rc, jobs.Queue, "withdrawal:create", []byte(`{"x":1}`))
			w := f.do(t, c.method, strings.Replace(c.path, "ID", info.ID, 1), basic(testUser, testPass))
			if w.Code >= 300 {
				t.Fatalf("%s %s: status %d (%q)", c.method, c.path, w.Code, w.Body.String())
			}
			logs := f.logs.String()
			logged := strings.Contains(logs, msg) && strings.Contains(logs, `"user":"`+testUser+`"`) &&
				strings.Contains(logs, info.ID)
			if logged != c.want {
				t.Errorf("%s: change logged %v, want %v\n%s", c.name, logged, c.want, logs)
			}
		})
	}
}
