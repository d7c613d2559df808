package psp_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/psp"
)

// countingConn counts the writes made on a client connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestCreateLeavesInOneWrite: a create's headers and body leave in one
// write on the connection (one TCP segment for a small create), not the
// headers flushed first and the body copied after them, which costs a
// write on our side and a read on the PSP's for every payout. It still
// has no GetBody (TestCreateNeverReplayed and the replay tests).
func TestCreateLeavesInOneWrite(t *testing.T) {
	_, ts := startSandbox(t, nil)
	var writes atomic.Int64
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := newClient(t, ts.URL, func(cfg *psp.Config) { cfg.Transport = tr })
	ctx := context.Background()
	for i, ext := range []string{"ONE-1", "ONE-2"} {
		before := writes.Load()
		mustCreate(ctx, t, c, withdrawal(ext, "10.50", testCard))
		if n := writes.Load() - before; n != 1 {
			t.Errorf("create %d took %d writes on the connection, want 1", i+1, n)
		}
	}
}
