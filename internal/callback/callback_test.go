package callback

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testlog"
	"github.com/rs/zerolog"
)

const secret = "s3cret-s3cret-s3cret"

type recorder struct {
	mu    sync.Mutex
	hints []Hint
}

func (r *recorder) Hint(_ context.Context, h Hint) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hints = append(r.hints, h)
	return h.ExternalID == "E1", nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hints)
}

func start(t *testing.T, cfg Config) (string, *recorder, *testlog.Buffer, func() map[Result]int) {
	t.Helper()
	rec := &recorder{}
	logs := &testlog.Buffer{}
	var mu sync.Mutex
	results := map[Result]int{}
	s, err := New(cfg, rec, zerolog.New(logs), func(r Result) { mu.Lock(); results[r]++; mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	snapshot := func() map[Result]int {
		mu.Lock()
		defer mu.Unlock()
		c := map[Result]int{}
		for k, v := range results {
			c[k] = v
		}
		return c
	}
	return "http://" + ln.Addr().String(), rec, logs, snapshot
}

func post(t *testing.T, url, body string, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestCallbacks(t *testing.T) {
	url, rec, logs, results := start(t, Config{Secret: secret, MaxBody: 256})
	ok := map[string]string{DefaultHeader: secret}
	tests := []struct {
		name   string
		path   string
		body   string
		header map[string]string
		code   int
		result Result
	}{
		{"hint by header", "/", `{"externalId":"E1","pspDepositOrderID":"WD-1","status":"Paid"}`, ok, 200, Hinted},
		{"header name in any case", "/callbacks", `{"EXTERNALID":"E1"}`, map[string]string{"x-callback-secret": secret}, 200, Hinted},
		{"secret in the path", "/callbacks/" + secret, `{"externalId":"E1"}`, nil, 401, Unauthorized},
		{"secret in the query", "/callbacks?secret=" + secret, `{"externalId":"E1"}`, nil, 401, Unauthorized},
		{"secret as the query", "/callbacks?" + secret, `{"externalId":"E1"}`, nil, 401, Unauthorized},
		{"unknown order", "/", `{"externalId":"nobody"}`, ok, 200, NothingToDo},
		{"forged: wrong secret", "/", `{"externalId":"E1"}`, map[string]string{DefaultHeader: "guess"}, 401, Unauthorized},
		{"forged: no secret", "/callbacks/", `{"externalId":"E1"}`, nil, 401, Unauthorized},
		{"malformed", "/", `not json`, ok, 200, Malformed},
		{"no ids", "/", `{"status":"Paid"}`, ok, 200, Malformed},
		{"too large", "/", `{"externalId":"` + strings.Repeat("x", 300) + `"}`, ok, 413, TooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := results()[tt.result]
			if code := post(t, url+tt.path, tt.body, tt.header); code != tt.code {
				t.Fatalf("HTTP %d, want %d", code, tt.code)
			}
			testenv.Eventually(t, string(tt.result), func() bool { return results()[tt.result] == before+1 })
		})
	}
	if n := rec.count(); n != 3 {
		t.Fatalf("%d hints reached the payouts, want 3 (two for E1, one unknown)", n)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("the secret is in the log")
	}
}

func TestAllowlistAndRateLimit(t *testing.T) {
	url, _, _, results := start(t, Config{Secret: secret, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if code := post(t, url, `{"externalId":"E1"}`, map[string]string{DefaultHeader: secret}); code != 403 {
		t.Fatalf("source outside the allowlist: HTTP %d", code)
	}
	if n := results()[Forbidden]; n != 1 {
		t.Fatalf("forbidden counted %d, want 1", n)
	}
	url, _, _, results = start(t, Config{Secret: secret, Rate: 1})
	codes := map[int]int{}
	for i := 0; i < 10; i++ {
		codes[post(t, url, `{"externalId":"E1"}`, map[string]string{DefaultHeader: secret})]++
	}
	if codes[429] == 0 || codes[200] == 0 {
		t.Fatalf("rate 1/s, 10 at once: %v", codes)
	}
	if results()[Limited] != codes[429] {
		t.Fatalf("limited counted %d, answered %d", results()[Limited], codes[429])
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{Secret: "short"}).Validate(); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

// logLines decodes the JSON log lines of logs.
func logLines(t *testing.T, logs *testlog.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestForgedFloodIsSummarized: 2,000 forged callbacks from the PSP's own
// address, with genuine ones among them, log nothing per request, count
// every refusal, and take no rate from the genuine callbacks: all of them
// are accepted. One summary line then says how many were refused and why.
func TestForgedFloodIsSummarized(t *testing.T) {
	logs := &testlog.Buffer{}
	var mu sync.Mutex
	results := map[Result]int{}
	s, err := New(Config{Secret: secret, Rate: 5}, &recorder{}, zerolog.New(logs),
		func(r Result) { mu.Lock(); results[r]++; mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	send := func(sec string) int {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"externalId":"E1"}`))
		req.RemoteAddr = "198.51.100.7:4000" // the PSP's address, forged or not
		req.Header.Set(DefaultHeader, sec)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Code
	}
	const forged, genuine = 2000, 10 // genuine within the burst of rate 5/s
	accepted := 0
	for i := 0; i < forged; i++ {
		if code := send(fmt.Sprintf("guess-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("forged callback %d: HTTP %d, want 401", i, code)
		}
		if i%(forged/genuine) == forged/genuine-1 && send(secret) == http.StatusOK {
			accepted++
		}
	}
	if accepted != genuine {
		t.Errorf("%d of %d genuine callbacks accepted during the flood, want all: forged ones spent their rate", accepted, genuine)
	}
	if results[Unauthorized] != forged || results[Limited] != 0 {
		t.Errorf("counted %v, want %d unauthorized and none limited", results, forged)
	}
	if got := logs.String(); got != "" {
		t.Fatalf("the flood was logged per request:\n%.500s", got)
	}
	s.summarize(10 * time.Second)
	lines := logLines(t, logs)
	if len(lines) != 1 {
		t.Fatalf("%d summary lines, want 1:\n%s", len(lines), logs.String())
	}
	l := lines[0]
	want := "refused 2000 callbacks in the last 10s: 2000 bad or missing secret; from 1 sources, most from 198.51.100.7 (2000)"
	if l["message"] != want || l["level"] != "warn" || l["unauthorized"] != float64(forged) || l["refused"] != float64(forged) {
		t.Errorf("summary %v\nwant message %q, warn, unauthorized=refused=%d", l, want, forged)
	}
	s.summarize(10 * time.Second)
	if n := len(logLines(t, logs)); n != 1 {
		t.Errorf("a quiet interval logged a summary (%d lines)", n)
	}
}

// TestSummaryLinesOverHTTP: a flood over the network gives one summary
// line per interval whose counts add up to the refusals, and nothing per
// request.
func TestSummaryLinesOverHTTP(t *testing.T) {
	const every = 200 * time.Millisecond
	began := time.Now()
	url, _, logs, results := start(t, Config{Secret: secret, SummaryEvery: every})
	const forged = 2000
	for i := 0; i < forged; i++ {
		if code := post(t, url, `{"externalId":"E1"}`, map[string]string{DefaultHeader: "forged"}); code != 401 {
			t.Fatalf("HTTP %d", code)
		}
	}
	post(t, url, `{"externalId":"nobody"}`, map[string]string{DefaultHeader: secret})
	sum := func() (refused, ignored, lines int) {
		for _, l := range logLines(t, logs) {
			if !strings.HasPrefix(l["message"].(string), "refused ") {
				t.Fatalf("a line that is not a summary: %v", l)
			}
			r, _ := l["refused"].(float64)
			ig, _ := l["ignored"].(float64)
			refused, ignored, lines = refused+int(r), ignored+int(ig), lines+1
		}
		return
	}
	testenv.Eventually(t, "summaries of every refusal", func() bool { r, ig, _ := sum(); return r == forged && ig == 1 })
	_, _, lines := sum()
	if max := int(time.Since(began)/every) + 1; lines > max {
		t.Errorf("%d summary lines in %s, want at most one per %s (%d)", lines, time.Since(began), every, max)
	}
	if results()[Unauthorized] != forged || results()[NothingToDo] != 1 {
		t.Errorf("counted %v", results())
	}
}
