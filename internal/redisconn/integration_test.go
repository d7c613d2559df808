//go:build integration

package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// openWithin retries Open until it succeeds or the deadline passes (the
// server may still be starting); it returns the last error.
func openWithin(t *testing.T, opts Options, d time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := Open(context.Background(), opts)
		if err == nil {
			return c.Close()
		}
		if !errors.Is(err, ErrUnreachable) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRedis starts redis-server on a free loopback port, with password pw
// when not empty, and waits until it answers.
func startRedis(t *testing.T, pw string) string {
	t.Helper()
	var extra []string
	if pw != "" {
		extra = append(extra, "--requirepass", pw)
	}
	addr := redistest.Start(t, extra...).Addr
	if err := openWithin(t, Options{URL: "redis://:" + pw + "@" + addr, PingTimeout: time.Second}, 10*time.Second); err != nil {
		t.Fatalf("redis-server on %s never answered: %v", addr, err)
	}
	return addr
}

func TestIntegrationRedisServerAuth(t *testing.T) {
	const pw = "int-S3cret"
	addr := startRedis(t, pw)
	ctx := context.Background()

	c, err := Open(ctx, Options{URL: "redis://:" + pw + "@" + addr + "/1"})
	if err != nil {
		t.Fatalf("Open with password: %v", err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Written to db 1: visible from a db-1 client, not from db 0.
	c0, err := Open(ctx, Options{URL: "redis://default:" + pw + "@" + addr + "/0"})
	if err != nil {
		t.Fatalf("Open as user default: %v", err)
	}
	defer c0.Close()
	if n, _ := c0.Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("key written to db 0")
	}

	// (A password sent to a server without one is accepted by Redis 7: the
	// default user is "nopass". Nothing to test there.)
	for _, tt := range []struct{ name, url string }{
		{"wrong password", "redis://:wrong-" + pw + "@" + addr},
		{"no password", "redis://" + addr},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(ctx, Options{URL: tt.url})
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Open: %v, want ErrAuth", err)
			}
			assertNoSecret(t, "error", err.Error(), pw)
		})
	}
}

func TestIntegrationSentinel(t *testing.T) {
	const pw, sentinelPW = "master-S3cret", "sentinel-S3cret"
	master := startRedis(t, pw)
	mhost, mport, _ := net.SplitHostPort(master)

	dir := t.TempDir()
	sport := testenv.Port(t)
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
requirepass %s
sentinel monitor mymaster %s %s 1
sentinel auth-pass mymaster %s
`, sport, dir, sentinelPW, mhost, mport, pw)
	confPath := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	proc.StartT(t, proc.Spec{Name: "redis-sentinel", Bin: testenv.NeedTool(t, "redis-server"), Args: []string{confPath, "--sentinel"}, Dir: dir})

	url := fmt.Sprintf("redis-sentinel://:%s@127.0.0.1:%d/mymaster?db=2&sentinel_password=%s", pw, sport, sentinelPW)
	if err := openWithin(t, Options{URL: url, PingTimeout: time.Second}, 15*time.Second); err != nil {
		t.Fatalf("Open via sentinel: %v", err)
	}
	ctx := context.Background()
	c, err := Open(ctx, Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "via-sentinel", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	direct, err := Open(ctx, Options{URL: "redis://:" + pw + "@" + master + "/2"})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if v, err := direct.Get(ctx, "via-sentinel").Result(); err != nil || v != "1" {
		t.Fatalf("master db 2 has %q, %v", v, err)
	}

	// Without the sentinel password the sentinel refuses us.
	bad := fmt.Sprintf("redis-sentinel://:%s@127.0.0.1:%d/mymaster", pw, sport)
	if _, err := Open(ctx, Options{URL: bad, PingTimeout: time.Second}); err == nil {
		t.Fatal("Open without sentinel password succeeded")
	} else {
		assertNoSecret(t, "error", err.Error(), pw, sentinelPW)
	}
}
