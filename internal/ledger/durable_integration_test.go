//go:build integration

package ledger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// TestBeginCreateAckedCountsReplicas runs the begin-create transition with
// a WAIT on a real master, first alone (no acknowledgement: the worker
// must not send) and then with a replica attached (one acknowledgement).
func TestBeginCreateAckedCountsReplicas(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { rdb.Close() })
	l := New(rdb)
	seed(t, l, "b", 2)

	dur, err := redisconn.ReadDurability(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if dur.Replicas != 0 || dur.AppendOnly != "no" || safeOnly(dur.Safe(true)) {
		t.Fatalf("lone master without AOF: %+v", dur)
	}
	b, acked, err := l.BeginCreateAcked(ctx, rdb, "b", "E1", 1, 1, 100*time.Millisecond)
	if err != nil || b.Action != decide.Proceed || acked != 0 {
		t.Fatalf("alone: %v acked=%d err=%v; want proceed with 0 acknowledgements", b.Action, acked, err)
	}

	host, port, _ := strings.Cut(master.Addr, ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { rr.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := rr.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not sync: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, acked, err = l.BeginCreateAcked(ctx, rdb, "b", "E2", 1, 1, 5*time.Second)
	if err != nil || b.Action != decide.Proceed || acked != 1 {
		t.Fatalf("with a replica: %v acked=%d err=%v; want proceed with 1", b.Action, acked, err)
	}
	if got, _ := rr.HGet(ctx, payoutKey("b", "E2"), "state").Result(); got != string(lifecycle.Submitting) {
		t.Fatalf("replica has state %q right after the acknowledgement, want submitting", got)
	}
	if dur, _ := redisconn.ReadDurability(ctx, rdb); dur.Replicas != 1 || !safeOnly(dur.Safe(true)) || safeOnly(dur.Safe(false)) {
		t.Fatalf("with a replica: %+v", dur)
	}
}

func safeOnly(ok bool, _ string) bool { return ok }
