package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv"
)

// The faults of the API proxy (Config.APISubmit), shares of the requests:
// answered 502 without reaching `payout api`; passed on, and the answer
// lost (the connection closed: the batch may well exist); passed on, and
// answered 504 instead of the answer.
const (
	pAPIRefuse   = 0.2
	pAPIDropped  = 0.25
	pAPIGateway  = 0.15
	apiKeyPrefix = "create-"
	apiToken     = "chaos-api"
	apiStaging   = "api-staging"
)

// FlakyProxy is a reverse proxy in front of `payout api` that loses
// requests and answers, like redisfault does for Redis: the request may
// have run when its answer is lost (always the first one's). The suite's
// other fault proxies speak RESP (redisfault) or stand for the PSP
// (Gateway); this one is plain HTTP.
type FlakyProxy struct {
	srv      *http.Server
	ln       net.Listener
	upstream string
	client   *http.Client

	mu       sync.Mutex
	rng      *mrand.Rand
	requests int
	faults   map[string]int
}

// NewFlakyProxy starts a proxy to upstream (http://host:port) on a free
// loopback port.
func NewFlakyProxy(seed int64, upstream string) (*FlakyProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FlakyProxy{ln: ln, upstream: upstream, client: &http.Client{Timeout: time.Minute},
		rng: mrand.New(mrand.NewPCG(uint64(seed), 0xa91)), faults: map[string]int{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL.
func (p *FlakyProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *FlakyProxy) fault(kind string) {
	p.mu.Lock()
	p.faults[kind]++
	p.mu.Unlock()
}

// ServeHTTP passes one request on, or not, and its answer back, or not.
func (p *FlakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.requests++
	x := p.rng.Float64()
	if p.requests == 1 {
		// The first answer is always lost after the request ran: the
		// case an Idempotency-Key is for.
		x = pAPIRefuse
	}
	p.mu.Unlock()
	if x < pAPIRefuse {
		p.fault("refused")
		http.Error(w, "proxy: upstream unreachable", http.StatusBadGateway)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		p.fault("upstream error")
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case x < pAPIRefuse+pAPIDropped:
		p.fault("answer dropped")
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		http.Error(w, "proxy: answer lost", http.StatusBadGateway)
		return
	case x < pAPIRefuse+pAPIDropped+pAPIGateway:
		p.fault("504 after the answer")
		http.Error(w, "proxy: upstream timed out", http.StatusGatewayTimeout)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// Stats returns the requests received and the faults injected.
func (p *FlakyProxy) Stats() (requests, faults int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.faults {
		faults += n
	}
	return p.requests, faults
}

// Close stops the proxy.
func (p *FlakyProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// apiSubmission is the state of the one file submitted through the API.
type apiSubmission struct {
	file  string // the file whose rows go through the API (not the spool)
	key   string // its Idempotency-Key
	proxy *FlakyProxy
	token string

	mu       sync.Mutex
	done     bool
	status   int    // the answer that ended the submission
	batch    string // the batch id it answered
	attempts int
	err      error
}

// apiBody is the create request of file f: every row as an item, the
// batch named so that its file is f's name.
func apiBody(f PayoutFile) ([]byte, error) {
	type item struct {
		ExternalID  string            `json:"externalId"`
		Amount      string            `json:"amount"`
		Destination map[string]string `json:"destination"`
	}
	items := make([]item, 0, len(f.Rows))
	var total money.Amount
	for _, r := range f.Rows {
		d := map[string]string{"telecomOperator": r.Telecom}
		if r.Card != "" {
			d = map[string]string{"cardNumber": r.CardText}
		}
		items = append(items, item{ExternalID: r.ExternalID, Amount: r.AmountText, Destination: d})
		total = total.Add(r.Amount)
	}
	// The API names the file of a batch NAME.csv.
	return json.Marshal(map[string]any{"name": strings.TrimSuffix(f.Name, ".csv"), "expectRows": len(f.Rows), "expectTotal": total.String(), "items": items})
}

// submitAPI posts file f to /api/v1/batches through the flaky proxy with
// one Idempotency-Key, again and again until an answer says the batch
// exists (201, or 200: the same content already loaded), for up to two
// minutes.
func (h *harness) submitAPI(ctx context.Context, f PayoutFile) {
	s := h.api
	body, err := apiBody(f)
	if err != nil {
		s.finish(0, "", 0, err)
		return
	}
	client := &http.Client{Timeout: 30 * time.Second}
	attempts := 0
	var status int
	var batch string
	err = testenv.Poll(ctx, 2*time.Minute, 300*time.Millisecond, func() (bool, error) {
		attempts++
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.proxy.URL()+"/api/v1/batches", bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Idempotency-Key", s.key)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil // the answer was lost: the same key again
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
		switch {
		case status == http.StatusCreated || status == http.StatusOK:
			var ans struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(b, &ans); err != nil || ans.ID == "" {
				return false, fmt.Errorf("answer %d without a batch id: %.200s", status, b)
			}
			batch = ans.ID
			return true, nil
		case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
			return false, nil // in progress, limited, or a fault: again
		}
		return false, fmt.Errorf("payout api answered %d: %.300s", status, b)
	})
	s.finish(status, batch, attempts, err)
	h.logf("API: %s submitted in %d requests with Idempotency-Key %s: %d, batch %s (%v)", f.Name, attempts, s.key, status, batch, err)
}

func (s *apiSubmission) finish(status int, batch string, attempts int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done, s.status, s.batch, s.attempts, s.err = true, status, batch, attempts, err
}

// startAPI creates the API token, starts `payout api` (with the loader's
// approval rule) and the flaky proxy in front of it.
func (h *harness) startAPI(ctx context.Context) error {
	c := h.cfg
	code, out, err := runOnce(ctx, h.payoutBin, []string{"token", "--redis", h.redis.URL(), "--role", "maker", "--log-format", "json", "create", apiToken},
		append(append([]string(nil), h.env...), "SUDO_USER=chaos-admin"), h.path(dirLogs, "token.log"), true)
	if err != nil || code != 0 {
		return fmt.Errorf("payout token create: exit %d: %v", code, err)
	}
	if err := os.MkdirAll(h.path(apiStaging), 0o700); err != nil {
		return err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"api", "--addr", addr, "--redis", h.redis.URL(), "--data-key-file", h.keyFile,
		"--staging", h.path(apiStaging), "--log-format", "json"}
	args = append(args, h.loaderApprovalArgs()...)
	p, err := startProc("api", h.payoutBin, args, h.env, h.path(dirLogs, "api.log"))
	if err != nil {
		return err
	}
	h.procs = append(h.procs, p)
	err = testenv.Poll(ctx, 15*time.Second, 50*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("payout api exited (code %d, see logs/api.log)", p.ExitCode())
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
	if err != nil {
		return err
	}
	proxy, err := NewFlakyProxy(c.Seed, "http://"+addr)
	if err != nil {
		return err
	}
	f := h.files[len(h.files)-1]
	h.api = &apiSubmission{file: f.Name, key: apiKeyPrefix + strings.TrimSuffix(f.Name, ".csv"), proxy: proxy,
		token: strings.TrimSpace(string(out))}
	h.logf("%s goes through payout api (POST /api/v1/batches, one Idempotency-Key) behind a proxy that loses the first answer, then refuses %.0f%% of the requests, loses %.0f%% of the answers and answers %.0f%% 504 after the API answered",
		f.Name, 100*pAPIRefuse, 100*pAPIDropped, 100*pAPIGateway)
	return nil
}

// apiBatches returns the batches of the API's file, in Redis and
// archived.
func (h *harness) apiBatches(ctx context.Context) ([]string, error) {
	st, err := h.statuses(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range st {
		if s.File == h.api.file {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}

// checkAPI puts the API's figures in fig: exactly one batch of the file,
// the one its answer named. A submission that got no answer, or another
// batch, counts as a mismatch.
func (h *harness) checkAPI(ids []string, fig *Figures) []string {
	s := h.api
	fig.APIChecked = true
	fig.APIRequests, fig.APIFaults = s.proxy.Stats()
	fig.APIBatches = len(ids)
	s.mu.Lock()
	defer s.mu.Unlock()
	h.logf("API: %d requests through the proxy (%v), batches of %s: %v", fig.APIRequests, s.proxy.faultsCopy(), s.file, ids)
	switch {
	case !s.done || s.err != nil:
		fig.Mismatches++
		return []string{fmt.Sprintf("mismatch: %s through the API: no answer with a batch after %d requests (%v)", s.file, s.attempts, s.err)}
	case len(ids) == 1 && ids[0] != s.batch:
		fig.Mismatches++
		return []string{fmt.Sprintf("mismatch: %s through the API: answered batch %s, the ledger holds %s", s.file, s.batch, ids[0])}
	}
	return nil
}

func (p *FlakyProxy) faultsCopy() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.faults))
	for k, v := range p.faults {
		m[k] = v
	}
	return m
}
