package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Admin is a client of the simulator's admin API (/sandbox/...), for tests
// and the chaos suite. The zero value with URL set is ready to use:
//
//	adm := sandbox.Admin{URL: "http://127.0.0.1:8090"}
//	orders, err := adm.Orders(ctx)
type Admin struct {
	URL    string       // the simulator's base URL, e.g. http://127.0.0.1:8090
	Client *http.Client // nil: http.DefaultClient
}

// adminTimeout bounds each admin request.
const adminTimeout = 10 * time.Second

// Health returns nil once the simulator answers /sandbox/health.
func (a Admin) Health(ctx context.Context) error {
	return a.do(ctx, http.MethodGet, "/sandbox/health", nil, nil)
}

// Orders returns the stored orders.
func (a Admin) Orders(ctx context.Context) ([]Order, error) {
	var o []Order
	return o, a.do(ctx, http.MethodGet, "/sandbox/orders", nil, &o)
}

// Stats returns the counters.
func (a Admin) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	return s, a.do(ctx, http.MethodGet, "/sandbox/stats", nil, &s)
}

// Lifecycle returns the lifecycle and callback configuration.
func (a Admin) Lifecycle(ctx context.Context) (LifecycleJSON, error) {
	var l LifecycleJSON
	return l, a.do(ctx, http.MethodGet, "/sandbox/lifecycle", nil, &l)
}

// Reset forgets orders and counters.
func (a Admin) Reset(ctx context.Context) error {
	return a.do(ctx, http.MethodPost, "/sandbox/reset", nil, nil)
}

// Faults returns the fault settings in force.
func (a Admin) Faults(ctx context.Context) (FaultsJSON, error) {
	var f FaultsJSON
	return f, a.do(ctx, http.MethodGet, "/sandbox/faults", nil, &f)
}

// SetFaults replaces the fault settings and returns those now in force.
func (a Admin) SetFaults(ctx context.Context, f FaultsJSON) (FaultsJSON, error) {
	var now FaultsJSON
	return now, a.do(ctx, http.MethodPut, "/sandbox/faults", f, &now)
}

// Force queues forced answers (see Server.Force).
func (a Admin) Force(ctx context.Context, f Force) error {
	return a.do(ctx, http.MethodPost, "/sandbox/force", f, nil)
}

// ClearForced drops the forced answers not used yet.
func (a Admin) ClearForced(ctx context.Context) error {
	return a.do(ctx, http.MethodDelete, "/sandbox/force", nil, nil)
}

// do sends body (JSON, if not nil) to path and decodes a 200 answer into
// out (if not nil).
func (a Admin) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.URL, "/")+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("sandbox admin: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("sandbox admin: %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sandbox admin: %s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sandbox admin: %s %s: %w", method, path, err)
	}
	return nil
}
