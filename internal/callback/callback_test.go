package callback

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/testenv"
	"github.com/acme/payout/internal/testlog"
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
		{"secret in the path", "/callbacks/" + secret, `{"EXTERNALID":"E1"}`, nil, 200, Hinted},
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
