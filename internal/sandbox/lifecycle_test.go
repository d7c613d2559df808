package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/sandbox"
)

const cbSecret = "cb-SECRET-value-42"

// fakeClock is the simulator's clock in these tests: time moves only when
// the test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// createWD creates a withdrawal and returns the HTTP status.
func createWD(t testing.TB, base, ext string) int {
	t.Helper()
	code, _ := do(t, "POST", base+"/api/v1/integration/bridge/withdrawal-order", "Bearer "+token,
		`{"externalId":"`+ext+`","amount":"10.00","properties":[{"key":"cardNumber","value":"`+goodCard+`"}]}`)
	return code
}

// createAny creates a withdrawal whatever becomes of the answer (a dropped
// connection is no error here).
func createAny(base, ext string) {
	req, _ := http.NewRequest("POST", base+"/api/v1/integration/bridge/withdrawal-order",
		strings.NewReader(`{"externalId":"`+ext+`","amount":"10.00","properties":[{"key":"cardNumber","value":"`+goodCard+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

type statusAnswer struct {
	Amount       string `json:"amount"`
	Status       string `json:"status"`
	ExternalID   string `json:"externalId"`
	OrderID      string `json:"pspDepositOrderID"`
	StatusReason string `json:"statusReason"`
}

func getStatus(t testing.TB, base, id string) (int, statusAnswer, string) {
	t.Helper()
	code, body := do(t, "GET", base+"/api/v1/integration/bridge/withdrawal-order/"+id, "Bearer "+token, "")
	var a statusAnswer
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("status body %q: %v", body, err)
		}
	}
	return code, a, body
}

// TestLifecycle follows one order through its statuses on the fake clock.
func TestLifecycle(t *testing.T) {
	type step struct {
		at     time.Duration // since creation
		status string
		reason bool
	}
	for _, tc := range []struct {
		name  string
		cfg   func(*sandbox.Config)
		steps []step
	}{
		{"no lifecycle: Created forever", nil,
			[]step{{0, "Created", false}, {time.Hour, "Created", false}, {1000 * time.Hour, "Created", false}}},
		{"settle 2s, all paid", func(c *sandbox.Config) { c.SettleAfter = 2 * time.Second },
			[]step{{0, "Created", false}, {999 * time.Millisecond, "Created", false}, {time.Second, "Processing", false},
				{1999 * time.Millisecond, "Processing", false}, {2 * time.Second, "Paid", false}, {time.Hour, "Paid", false}}},
		{"settle 2s, all failed", func(c *sandbox.Config) { c.SettleAfter = 2 * time.Second; c.PFail = 1 },
			[]step{{0, "Created", false}, {time.Second, "Processing", false}, {2 * time.Second, "Failed", true}}},
		{"status words", func(c *sandbox.Config) {
			c.SettleAfter, c.PFail, c.PaidStatus, c.FailedStatus = time.Minute, 1, "SUCCESS", "DECLINED"
		}, []step{{0, "Created", false}, {30 * time.Second, "Processing", false}, {time.Minute, "DECLINED", true}}},
		{"paid word", func(c *sandbox.Config) { c.SettleAfter, c.PaidStatus = time.Minute, "COMPLETED" },
			[]step{{time.Minute, "COMPLETED", false}}},
		{"status lag longer than settling", func(c *sandbox.Config) { c.SettleAfter, c.StatusLag = 2*time.Second, 3*time.Second },
			[]step{{time.Second, "", false}, {3 * time.Second, "Paid", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			sb, ts, _ := start(t, func(c *sandbox.Config) {
				c.Clock = clock
				if tc.cfg != nil {
					tc.cfg(c)
				}
			})
			if code := createWD(t, ts.URL, "E1"); code != 200 {
				t.Fatalf("create %d", code)
			}
			o := sb.Orders()[0]
			t0 := clock.Now()
			for _, st := range tc.steps {
				clock.Set(t0.Add(st.at))
				for _, id := range []string{o.PSPOrderID, "E1"} {
					code, a, body := getStatus(t, ts.URL, id)
					if st.status == "" {
						if code != 404 {
							t.Errorf("at %s by %s: %d %s, want 404 (lag)", st.at, id, code, body)
						}
						continue
					}
					if code != 200 || a.Status != st.status || (a.StatusReason != "") != st.reason {
						t.Errorf("at %s by %s: %d %s, want %s (reason %v)", st.at, id, code, body, st.status, st.reason)
					}
					if st.reason && !slices.Contains(sandbox.FailReasons, a.StatusReason) {
						t.Errorf("reason %q not one of FailReasons", a.StatusReason)
					}
					if !st.reason && strings.Contains(body, "statusReason") {
						t.Errorf("at %s: statusReason given: %s", st.at, body)
					}
				}
				if got := sb.Orders()[0]; got.Status != st.status && st.status != "" {
					t.Errorf("at %s: Orders() says %q, want %q", st.at, got.Status, st.status)
				}
			}
			// The truth is known from creation on.
			last := tc.steps[len(tc.steps)-1].status
			if o.FinalStatus != last {
				t.Errorf("FinalStatus %q, want %q", o.FinalStatus, last)
			}
			if (o.FinalAt.IsZero()) != (last == "Created") {
				t.Errorf("FinalAt %v", o.FinalAt)
			}
		})
	}
}

// TestPFailShare: the failed share is drawn at creation from the seed,
// apart from the faults' draws: the same seed fails the same orders,
// whatever the fault knobs did to the answers, and after settling the
// status answers, Orders() and Stats() agree with the truth.
func TestPFailShare(t *testing.T) {
	const n = 400
	run := func(faults func(*sandbox.Server)) (failed []string, sb *sandbox.Server, base string) {
		clock := newClock()
		sb, ts, _ := start(t, func(c *sandbox.Config) {
			c.Clock, c.Seed, c.SettleAfter, c.PFail, c.HangFor = clock, 42, 2*time.Second, 0.2, time.Millisecond
		})
		if faults != nil {
			faults(sb)
		}
		for i := range n {
			createAny(ts.URL, fmt.Sprintf("E%03d", i))
		}
		if got := len(sb.Orders()); got != n {
			t.Fatalf("%d orders stored, want %d", got, n)
		}
		clock.Add(2 * time.Second)
		for _, o := range sb.Orders() {
			if o.FinalStatus == "Failed" {
				failed = append(failed, o.ExternalID)
				if !slices.Contains(sandbox.FailReasons, o.FinalReason) || o.StatusReason != o.FinalReason {
					t.Errorf("%s: reason %q, final reason %q", o.ExternalID, o.StatusReason, o.FinalReason)
				}
			} else if o.FinalStatus != "Paid" || o.FinalReason != "" {
				t.Errorf("%s: final %q %q", o.ExternalID, o.FinalStatus, o.FinalReason)
			}
			if o.Status != o.FinalStatus {
				t.Errorf("%s: status %q after settling, final %q", o.ExternalID, o.Status, o.FinalStatus)
			}
		}
		return failed, sb, ts.URL
	}
	failed, sb, base := run(nil)
	// The exact count for seed 42 (a binomial draw around 0.2*n).
	if len(failed) != 83 {
		t.Errorf("seed 42: %d of %d failed, want exactly 83", len(failed), n)
	}
	st := sb.Stats()
	if st.Failed != len(failed) || st.Paid != n-len(failed) {
		t.Errorf("stats paid %d failed %d, want %d %d", st.Paid, st.Failed, n-len(failed), len(failed))
	}
	for i := range n {
		ext := fmt.Sprintf("E%03d", i)
		_, a, _ := getStatus(t, base, ext)
		if want := slices.Contains(failed, ext); (a.Status == "Failed") != want || (a.Status != "Failed" && a.Status != "Paid") {
			t.Errorf("%s answers %q, failed per truth: %v", ext, a.Status, want)
		}
	}

	again, _, _ := run(nil)
	if !slices.Equal(again, failed) {
		t.Errorf("same seed, other failures:\n%v\n%v", failed, again)
	}
	// Orders stored under every bad answer live the same lifecycle.
	withFaults, sbf, _ := run(func(sb *sandbox.Server) {
		for _, f := range []sandbox.Force{
			{Status: 500, Store: true, Count: 50},
			{Fault: sandbox.FaultDrop, Store: true, Count: 50},
			{Fault: sandbox.FaultHang, Store: true, Count: 50},
			{Fault: sandbox.FaultH2Reset, Store: true, Count: 50},
		} {
			if err := sb.Force(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := sb.SetFaults(sandbox.Faults{PAmbiguous: 0.5, HangFor: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.Equal(withFaults, failed) {
		t.Errorf("faults changed the failures:\n%v\n%v", failed, withFaults)
	}
	answers := map[string]int{}
	for _, o := range sbf.Orders() {
		answers[o.Answer]++
	}
	if answers["200"] == n || answers["drop"] == 0 {
		t.Errorf("faults did not apply: %v", answers)
	}
}

// cbReceiver is the processor's end of the callbacks.
type cbReceiver struct {
	mu       sync.Mutex
	got      []receivedCallback
	attempts int
	fail     func(attempt int) bool // answer 500 to this attempt
	hang     bool
	hanging  int
}

type receivedCallback struct {
	Secret string
	Body   map[string]string
	Raw    string
}

func (r *cbReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.hang {
		// Read the body first: only then does the server notice that
		// the client went away.
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.hanging++
		r.mu.Unlock()
		<-req.Context().Done()
		return
	}
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if r.fail != nil && r.fail(r.attempts) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var m map[string]string
	_ = json.Unmarshal(b, &m)
	r.got = append(r.got, receivedCallback{Secret: req.Header.Get(sandbox.CallbackSecretHeader), Body: m, Raw: string(b)})
}

func (r *cbReceiver) received() []receivedCallback {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// startCallbacks starts a simulator with callbacks to a receiver, and its
// callback sender (stopped, and waited for, at cleanup).
func startCallbacks(t *testing.T, recv *cbReceiver, mutate func(*sandbox.Config)) (*sandbox.Server, string, *fakeClock, *syncBuffer) {
	t.Helper()
	rs := httptest.NewServer(recv)
	t.Cleanup(rs.Close)
	clock := newClock()
	sb, ts, logs := start(t, func(c *sandbox.Config) {
		c.Clock, c.SettleAfter, c.CallbackURL, c.CallbackSecret = clock, 2*time.Second, rs.URL+"/psp/callback", cbSecret
		c.CallbackBackoff = time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sb.RunCallbacks(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if strings.Contains(logs.String(), cbSecret) {
			t.Errorf("sandbox log leaks the callback secret")
		}
	})
	return sb, ts.URL, clock, logs
}

func TestCallbacks(t *testing.T) {
	const orders = 6
	for _, tc := range []struct {
		name    string
		cfg     func(*sandbox.Config)
		perStep int // callbacks per status change
	}{
		{"one per change", func(c *sandbox.Config) { c.PFail = 0.5 }, 1},
		{"all duplicated", func(c *sandbox.Config) { c.PFail = 0.5; c.PCallbackDup = 1 }, 2},
		{"custom words", func(c *sandbox.Config) { c.PFail, c.PaidStatus, c.FailedStatus = 0.5, "OK", "KO" }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := &cbReceiver{}
			sb, base, clock, _ := startCallbacks(t, recv, tc.cfg)
			for i := range orders {
				createWD(t, base, fmt.Sprintf("E%d", i))
			}
			clock.Add(time.Second)
			testenv.Eventually(t, "Processing callbacks", func() bool { return len(recv.received()) == orders*tc.perStep })
			for _, c := range recv.received() {
				if c.Body["status"] != "Processing" || c.Secret != cbSecret || strings.Contains(c.Raw, "statusReason") {
					t.Errorf("callback %q secret %q", c.Raw, c.Secret)
				}
			}
			clock.Add(time.Second)
			// Counted once the simulator has the answer, after the receiver saw it.
			testenv.Eventually(t, "final callbacks", func() bool { return sb.Stats().CallbacksSent == 2*orders*tc.perStep })
			truth := map[string]sandbox.Order{}
			for _, o := range sb.Orders() {
				truth[o.PSPOrderID] = o
			}
			count := map[string]int{}
			for _, c := range recv.received()[orders*tc.perStep:] {
				o := truth[c.Body["pspDepositOrderID"]]
				if c.Secret != cbSecret || c.Body["externalId"] != o.ExternalID || c.Body["status"] != o.FinalStatus ||
					c.Body["statusReason"] != o.FinalReason || len(c.Body) != 3+min(len(o.FinalReason), 1) {
					t.Errorf("callback %q for order %+v", c.Raw, o)
				}
				count[o.PSPOrderID+" "+c.Body["status"]]++
			}
			for k, v := range count {
				if v != tc.perStep {
					t.Errorf("%s: %d callbacks, want %d", k, v, tc.perStep)
				}
			}
			st := sb.Stats()
			if st.CallbacksSent != 2*orders*tc.perStep || st.CallbacksFailed != 0 || st.Paid+st.Failed != orders || st.Failed == 0 || st.Paid == 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestCallbackDelayReorders: without a delay the callbacks of an order
// come in order; with one, the final callback of some order arrives before
// its Processing one. One delivery at a time makes the arrival order the
// due order, so that both are reproducible.
func TestCallbackDelayReorders(t *testing.T) {
	const orders = 20
	for _, delay := range []time.Duration{0, 10 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			recv := &cbReceiver{}
			sb, base, clock, _ := startCallbacks(t, recv, func(c *sandbox.Config) {
				c.CallbackDelay, c.CallbackConcurrency, c.Seed = delay, 1, 7
			})
			for i := range orders {
				createWD(t, base, fmt.Sprintf("E%d", i))
			}
			clock.Add(2 * time.Second) // both changes due at once
			if delay > 0 {
				clock.Add(delay)
			}
			testenv.Eventually(t, "all callbacks", func() bool { return sb.Stats().CallbacksSent == 2*orders })
			seen := map[string]bool{}
			reordered := 0
			for _, c := range recv.received() {
				ext := c.Body["externalId"]
				if c.Body["status"] == "Processing" && seen[ext] {
					reordered++
				}
				seen[ext] = true
			}
			if delay == 0 && reordered != 0 {
				t.Errorf("%d orders reordered without a delay", reordered)
			}
			if delay > 0 && reordered == 0 {
				t.Errorf("no order reordered with a delay of %s", delay)
			}
			if st := sb.Stats(); st.CallbacksSent != 2*orders {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestCallbackRetries(t *testing.T) {
	for _, tc := range []struct {
		name           string
		fail           func(int) bool
		sent, failed   int
		attempts       int
		logContains    string
		retries        int
		wantDroppedLog bool
	}{
		{name: "two failures then ok", fail: func(a int) bool { return a <= 2 }, sent: 1, attempts: 3},
		{name: "always failing: dropped after 3 retries", fail: func(int) bool { return true }, failed: 1, attempts: 4, wantDroppedLog: true},
		{name: "no retries", fail: func(int) bool { return true }, failed: 1, attempts: 1, retries: -1, wantDroppedLog: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := &cbReceiver{fail: tc.fail}
			sb, base, clock, logs := startCallbacks(t, recv, func(c *sandbox.Config) {
				c.SettleAfter = time.Hour // only the Processing change within the test
				c.CallbackRetries = tc.retries
			})
			createWD(t, base, "E1")
			clock.Add(30 * time.Minute)
			testenv.Eventually(t, "the outcome", func() bool { st := sb.Stats(); return st.CallbacksSent+st.CallbacksFailed == 1 })
			st := sb.Stats()
			recv.mu.Lock()
			attempts := recv.attempts
			recv.mu.Unlock()
			if st.CallbacksSent != tc.sent || st.CallbacksFailed != tc.failed || attempts != tc.attempts {
				t.Errorf("sent %d failed %d attempts %d; want %d %d %d", st.CallbacksSent, st.CallbacksFailed, attempts, tc.sent, tc.failed, tc.attempts)
			}
			if got := strings.Contains(logs.String(), "callback dropped"); got != tc.wantDroppedLog {
				t.Errorf("dropped logged: %v\n%s", got, logs.Tail(5))
			}
		})
	}
}

// TestNoCallbackWithoutURL: the sender does nothing and returns at once.
func TestNoCallbackWithoutURL(t *testing.T) {
	clock := newClock()
	sb, ts, _ := start(t, func(c *sandbox.Config) { c.Clock, c.SettleAfter = clock, time.Second })
	done := make(chan struct{})
	go func() { defer close(done); sb.RunCallbacks(context.Background()) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunCallbacks without a URL does not return")
	}
	createWD(t, ts.URL, "E1")
	clock.Add(time.Second)
	if st := sb.Stats(); st.CallbacksSent != 0 || st.CallbacksFailed != 0 || st.Paid != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestServeStopsCallbacks: Serve sends the callbacks, and its shutdown
// ends a delivery in progress.
func TestServeStopsCallbacks(t *testing.T) {
	recv := &cbReceiver{hang: true}
	rs := httptest.NewServer(recv)
	defer rs.Close()
	defer rs.CloseClientConnections()
	logs := &syncBuffer{}
	cfg := sandbox.DefaultConfig()
	cfg.Token, cfg.Seed, cfg.SettleAfter, cfg.CallbackURL, cfg.CallbackSecret = token, 1, 20*time.Millisecond, rs.URL, cbSecret
	sb := sandbox.New(cfg, zerolog.New(logs))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sb.Serve(ctx, ln) }()
	createWD(t, "http://"+ln.Addr().String(), "E1")
	testenv.Eventually(t, "a delivery in progress", func() bool { recv.mu.Lock(); defer recv.mu.Unlock(); return recv.hanging > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve does not stop while a callback hangs")
	}
	if strings.Contains(logs.String(), cbSecret) {
		t.Error("log leaks the callback secret")
	}
}

// TestAdminLifecycle: the orders list shows status, reason and the truth;
// the lifecycle endpoint shows the settings but never the secret.
func TestAdminLifecycle(t *testing.T) {
	clock := newClock()
	_, ts, _ := start(t, func(c *sandbox.Config) {
		c.Clock, c.SettleAfter, c.PFail = clock, time.Minute, 1
		c.CallbackURL, c.CallbackSecret = "http://user:pw@127.0.0.1:9/cb?k=v", cbSecret
	})
	createWD(t, ts.URL, "E1")
	_, body := do(t, "GET", ts.URL+"/sandbox/orders", "", "")
	var orders []map[string]any
	if err := json.Unmarshal([]byte(body), &orders); err != nil || len(orders) != 1 {
		t.Fatalf("orders %s", body)
	}
	o := orders[0]
	want := clock.Now().Add(time.Minute).Format(time.RFC3339Nano)
	if o["status"] != "Created" || o["statusReason"] != nil || o["finalStatus"] != "Failed" || o["finalAt"] != want ||
		!slices.Contains(sandbox.FailReasons, fmt.Sprint(o["finalReason"])) {
		t.Errorf("order %s", body)
	}
	clock.Add(time.Minute)
	_, body = do(t, "GET", ts.URL+"/sandbox/orders", "", "")
	if !strings.Contains(body, `"status":"Failed","statusReason":"`) {
		t.Errorf("settled order %s", body)
	}
	_, body = do(t, "GET", ts.URL+"/sandbox/stats", "", "")
	if !strings.Contains(body, `"paid":0,"failed":1,"callbacksSent":0,"callbacksFailed":0`) {
		t.Errorf("stats %s", body)
	}
	_, body = do(t, "GET", ts.URL+"/sandbox/lifecycle", "", "")
	if body != `{"settleAfter":"1m0s","pFail":1,"paidStatus":"Paid","failedStatus":"Failed","callbackUrl":"http://127.0.0.1:9/cb","pCallbackDup":0,"callbackDelay":"0s"}`+"\n" {
		t.Errorf("lifecycle %s", body)
	}
}

func TestLifecycleValidate(t *testing.T) {
	base := func(mut func(*sandbox.Config)) sandbox.Config {
		c := sandbox.DefaultConfig()
		mut(&c)
		return c
	}
	for _, tc := range []struct {
		cfg  sandbox.Config
		want string // "" for valid
	}{
		{base(func(c *sandbox.Config) { c.SettleAfter, c.PFail = time.Second, 0.2 }), ""},
		{base(func(c *sandbox.Config) { c.PaidStatus, c.FailedStatus = "", "" }), ""},
		{base(func(c *sandbox.Config) { c.PFail = 0.2 }), "p-fail needs settle-after"},
		{base(func(c *sandbox.Config) { c.PFail = 1.2; c.SettleAfter = time.Second }), "p-fail must be within"},
		{base(func(c *sandbox.Config) { c.SettleAfter = -time.Second }), "negative"},
		{base(func(c *sandbox.Config) { c.PaidStatus, c.FailedStatus = "X", "X" }), "must differ"},
		{base(func(c *sandbox.Config) { c.PaidStatus = "Processing" }), "must not be"},
		{base(func(c *sandbox.Config) { c.SettleAfter, c.CallbackURL = time.Second, "http://h/cb" }), "callback-secret"},
		{base(func(c *sandbox.Config) { c.CallbackURL, c.CallbackSecret = "http://h/cb", "s" }), "needs settle-after"},
		{base(func(c *sandbox.Config) {
			c.SettleAfter, c.CallbackURL, c.CallbackSecret = time.Second, "ftp://h/cb", "s"
		}), "http or https"},
		{base(func(c *sandbox.Config) { c.PCallbackDup = 0.5 }), "need callback-url"},
		{base(func(c *sandbox.Config) {
			c.SettleAfter, c.CallbackURL, c.CallbackSecret, c.CallbackDelay = time.Second, "https://h/cb", "s", time.Second
		}), ""},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
