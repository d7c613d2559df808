package redisconn

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
		return d, fmt.Errorf("redisconn: INFO replication: %w", err)
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
