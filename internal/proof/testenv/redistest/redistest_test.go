//go:build integration

package redistest

import (
	"context"
	"testing"
	"time"
)

// TestRestartKeepsAOFData starts a node with AOF, writes, crashes it and
// starts it again on the same port and directory: the data is back.
func TestRestartKeepsAOFData(t *testing.T) {
	s := StartConfig(t, Config{AOF: true})
	ctx := context.Background()
	c := s.ClientT(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr
	for _, how := range []string{"kill", "stop"} {
		if how == "kill" {
			s.Kill()
		} else {
			s.Stop(10 * time.Second)
		}
		if err := c.Ping(ctx).Err(); err == nil {
			t.Fatalf("%s: the server still answers", how)
		}
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" || s.Addr != addr {
			t.Fatalf("%s: after restart on %s: %q, %v", how, s.Addr, got, err)
		}
	}
}

// TestNewGivesAnEmptyDatabase writes into one test database and checks that
// the next is empty (with PAYOUT_TEST_REDIS_URL: another database number).
func TestNewGivesAnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		s := New(t)
		c := clientOf(t, s)
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("%s: %d keys, %v", s, n, err)
		}
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	rdb := c.Client(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := rdb.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 4 {
		t.Fatalf("dbsize %d, %v", n, err)
	}
}
