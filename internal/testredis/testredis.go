// Package testredis gives each test its own Redis: a database of the server
// named by PAYOUT_TEST_REDIS_URL, or else a redis-server process started on a
// free loopback port in a temporary directory. Under CI=true a missing Redis
// fails the test; elsewhere it skips it.
package testredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvURL names the variable that points tests at an existing Redis server.
const EnvURL = "PAYOUT_TEST_REDIS_URL"

// Server is a redis-server process owned by a test.
type Server struct {
	Addr string
	Dir  string
	cmd  *exec.Cmd
}

// URL returns the redis:// URL of database db.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// New returns the URL of a Redis database that belongs to this test alone and
// is empty. It uses a fresh redis-server unless PAYOUT_TEST_REDIS_URL is set,
// in which case it claims a database number of that server through a counter
// kept in database 0 and flushes it.
func New(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return claimDB(t, u)
	}
	return Start(t).URL(0)
}

// Start runs a redis-server for this test (stopped at cleanup). Extra
// arguments are passed on the command line (e.g. "--appendonly", "yes").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server not found in PATH (apt-get install -y redis-server)")
	}
	dir := t.TempDir()
	var lastErr error
	for try := 0; try < 5; try++ {
		port := FreePort(t)
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(dir, "redis.log"),
		}, extra...)
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir}
		s.cmd = exec.Command(bin, args...)
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		if err := waitReady(s.Addr, 10*time.Second); err != nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
			lastErr = err
			continue
		}
		t.Cleanup(s.Stop)
		return s
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

// Stop kills the server (idempotent).
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Missing fails the test under CI=true and skips it elsewhere.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", why)
	}
	t.Skip(why)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitReady(addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		var reply redis.Error
		if err == nil || errors.As(err, &reply) { // NOAUTH and the like: the server is up
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func claimDB(t testing.TB, base string) string {
	t.Helper()
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	ctx := context.Background()
	opt.DB = 0
	c := redis.NewClient(opt)
	defer c.Close()
	n, err := c.Incr(ctx, "payout:test:dbcounter").Result()
	if err != nil {
		Missing(t, fmt.Sprintf("%s unreachable: %v", EnvURL, err))
	}
	dbs := 16
	if v, err := c.ConfigGet(ctx, "databases").Result(); err == nil {
		if d, err := strconv.Atoi(v["databases"]); err == nil && d > 1 {
			dbs = d
		}
	}
	opt.DB = 1 + int(n-1)%(dbs-1)
	d := redis.NewClient(opt)
	defer d.Close()
	if err := d.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("flush db %d: %v", opt.DB, err)
	}
	u := *opt
	return fmt.Sprintf("redis://%s/%d", u.Addr, u.DB)
}
