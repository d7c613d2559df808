package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the variable that points tests at an existing Redis server.
const EnvURL = "PAYOUT_TEST_REDIS_URL"

// New returns the URL of a Redis database that belongs to this test alone
// and is empty. It uses a fresh redis-server unless PAYOUT_TEST_REDIS_URL is
// set, in which case it claims a database number of that server through a
// counter kept in database 0 and flushes it.
func New(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return claimDB(t, u)
	}
	return Start(t).URL()
}

// Start runs a redis-server without persistence for this test (killed at
// cleanup); extra arguments go on its command line.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return StartConfig(t, Config{Extra: extra})
}

// StartConfig runs a redis-server as cfg says (Dir defaults to a temporary
// directory) for this test, killed at cleanup.
func StartConfig(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Launch(context.Background(), cfg)
	if errors.Is(err, ErrNoRedis) {
		testenv.Missing(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// ClientT returns a client of database 0, closed at cleanup.
func (s *Server) ClientT(t testing.TB) *redis.Client {
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func claimDB(t testing.TB, base string) string {
	t.Helper()
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opt.DB = 0
	c := redis.NewClient(opt)
	defer c.Close()
	n, err := c.Incr(ctx, "payout:test:dbcounter").Result()
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("%s unreachable: %v", EnvURL, err))
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
	return fmt.Sprintf("redis://%s/%d", opt.Addr, opt.DB)
}
