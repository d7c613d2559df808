package ledger

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
)

// TestLeased: the periodic work passes only while its process holds the
// lease: not while another holds it, once when it is free, again only
// when the lease expires (miniredis's clock moved on), and a lease that
// cannot be taken goes to leaseErr without a pass. No timing is
// asserted: each step polls the lease attempts Redis saw.
func TestLeased(t *testing.T) {
	l, clk := newTestLedger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var attempts, passes, leaseErrs atomic.Int64
	var failing atomic.Bool
	clk.m.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if !strings.EqualFold(cmd, "SET") || len(args) == 0 || args[0] != leaseKey("x") {
			return false
		}
		attempts.Add(1)
		if failing.Load() {
			c.WriteError("ERR injected")
			return true
		}
		return false
	})
	if ok, err := l.Locks().TryLease(ctx, "x", "other", time.Hour); !ok || err != nil {
		t.Fatalf("TryLease: %v %v", ok, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Locks().Leased(ctx, "x", time.Millisecond, func(error) { leaseErrs.Add(1) }, func(context.Context) { passes.Add(1) })
	}()
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 10s (attempts %d, passes %d, lease errors %d)", what, attempts.Load(), passes.Load(), leaseErrs.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	more := func(n int64) func() bool {
		from := attempts.Load()
		return func() bool { return attempts.Load() >= from+n }
	}

	until("attempts on a lease held by another", more(3))
	if n := passes.Load(); n != 0 {
		t.Fatalf("%d passes while another process held the lease", n)
	}
	clk.m.Del(leaseKey("x"))
	until("pass once the lease is free", func() bool { return passes.Load() >= 1 })
	until("attempts while the pass's own lease lasts", more(3))
	if n := passes.Load(); n != 1 {
		t.Fatalf("%d passes within one lease, want 1", n)
	}
	clk.m.FastForward(time.Second)
	until("pass after the lease expired", func() bool { return passes.Load() >= 2 })
	failing.Store(true)
	until("pass's lease taken", more(1)) // the pass after the expiry is over
	before := passes.Load()
	clk.m.Del(leaseKey("x"))
	until("lease errors", func() bool { return leaseErrs.Load() >= 2 })
	if n := passes.Load(); n != before {
		t.Fatalf("%d passes without the lease", n-before)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Leased did not return after its context ended")
	}
}
