package worker

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestReportAuthFault: distinct workers within the window are counted,
// the same worker twice is one, older reports are forgotten.
func TestReportAuthFault(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m.SetTime(now)
	for i, want := range []int{1, 1} {
		if n, err := reportAuthFault(ctx, rdb, "host:1", time.Minute); err != nil || n != want {
			t.Fatalf("report %d of host:1: %d, %v; want %d", i+1, n, err, want)
		}
	}
	m.SetTime(now.Add(2 * time.Minute))
	if n, _ := reportAuthFault(ctx, rdb, "host:2", time.Minute); n != 1 {
		t.Fatalf("host:2 after the window: %d, want 1 (host:1's report forgotten)", n)
	}
	if n, _ := reportAuthFault(ctx, rdb, "host:1", time.Minute); n != 2 {
		t.Fatalf("host:1 and host:2 within the window: %d, want 2", n)
	}
	if _, err := reportAuthFault(ctx, rdb, "host:1", 0); err == nil {
		t.Fatal("a window of 0 was accepted")
	}
}
