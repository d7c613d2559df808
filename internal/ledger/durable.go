package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BeginCreateAcked is BeginCreate followed, on the same connection, by
// WAIT replicas timeout: Redis acknowledges a write to replicas per
// connection, so the two go in one pipeline on a plain client (for a
// cluster, the master of the payout's slot). It returns the decision and
// how many replicas acknowledged the submitting mark. conn must not be an
// autopipeliner, whose commands may travel on different connections.
//
// A caller that gets Proceed with fewer acknowledgements than it asked for
// must not send: a failover now could bring up a replica without the mark,
// and a redelivered task would send the create again. It hands the payout
// back to queued (FinishCreate, nothing sent).
func (l *Ledger) BeginCreateAcked(ctx context.Context, conn redis.UniversalClient, batch, ext string, attempt, replicas int, timeout time.Duration) (Begin, int, error) {
	key := payoutKey(batch, ext)
	var c redis.Cmdable = conn
	if cc, ok := conn.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return Begin{}, 0, fmt.Errorf("ledger: master of %s: %w", ext, err)
		}
		c = m
	}
	// One operation id for every try, and transition's retry of a
	// transport fault: a run that happened answers its first decision.
	args := append(beginArgs{Attempt: attempt, Note: interruptedNote, Keys: l.keys}.argv(), l.actor, l.newOp())
	var begin, wait *redis.Cmd
	err := retryTransport(ctx, func() error {
		pipe := c.Pipeline()
		begin = beginCreateScript.Eval(ctx, pipe, beginKeys(batch, ext), args...)
		wait = pipe.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		return Begin{}, 0, fmt.Errorf("ledger: begin create of %s with WAIT: %w", ext, err)
	}
	b, err := parseBegin(batch, ext, begin)
	if err != nil {
		return Begin{}, 0, err
	}
	acked, err := wait.Int()
	if err != nil {
		return Begin{}, 0, fmt.Errorf("ledger: WAIT after begin create of %s: %w", ext, err)
	}
	return b, acked, nil
}

// Durability is what Redis says of how it keeps the ledger.
type Durability struct {
	Replicas    int    // replicas connected to the master now
	AppendOnly  string // "yes", "no", or "" when CONFIG GET is refused
	AppendFsync string // "always", "everysec", "no", or ""
}

// Safe reports whether a submitting mark this Redis acknowledged survives
// a crash, and if not why: the mark-before-create is safe with AOF
// `appendfsync always` (the write is on disk before the reply), or with a
// replica that acknowledges each mark (wait: the worker sends WAIT after
// it). `appendfsync everysec` is not: a crash of the machine loses up to
// about two seconds of acknowledged writes, marks among them (payout does
// not wait for the fsync: WAITAOF needs Redis 7.2).
func (d Durability) Safe(wait bool) (bool, string) {
	if d.Replicas > 0 && wait {
		return true, ""
	}
	aof := d.AppendOnly == "yes" && d.AppendFsync == "always"
	switch {
	case aof:
		return true, ""
	case d.AppendOnly == "":
		return false, "Redis refuses CONFIG GET and has no replica, so the ledger's durability cannot be checked"
	case d.Replicas > 0:
		return false, fmt.Sprintf("Redis has %d replicas but --wait-replicas 0 does not wait for them, and appendonly=%s appendfsync=%s", d.Replicas, d.AppendOnly, d.AppendFsync)
	case d.AppendOnly == "yes" && d.AppendFsync == "everysec":
		return false, "Redis has no replica and appendonly=yes appendfsync=everysec: a crash of the machine loses up to 2 seconds of the ledger's writes"
	}
	return false, fmt.Sprintf("Redis has no replica and appendonly=%s appendfsync=%s: a crash loses the ledger's writes since its last snapshot", d.AppendOnly, d.AppendFsync)
}

// ReadDurability asks Redis how it keeps data: INFO replication, and
// CONFIG GET appendonly/appendfsync where the server allows it (managed
// Redis services often refuse CONFIG: then AppendOnly is "").
func ReadDurability(ctx context.Context, conn redis.UniversalClient) (Durability, error) {
	var d Durability
	info, err := conn.Info(ctx, "replication").Result()
	if err != nil {
		return d, fmt.Errorf("ledger: INFO replication: %w", err)
	}
	d.Replicas = infoInt(info, "connected_slaves")
	if m, err := conn.ConfigGet(ctx, "append*").Result(); err == nil {
		d.AppendOnly, d.AppendFsync = m["appendonly"], m["appendfsync"]
	}
	return d, nil
}

func infoInt(info, field string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
