package cli

import (
	"context"
	"flag"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// durabilityFlags decide how sure a worker must be that the submitting
// mark survives a Redis failure before it sends a create.
type durabilityFlags struct {
	waitReplicas   int
	waitTimeout    time.Duration
	requireDurable bool
}

func (d *durabilityFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&d.waitReplicas, "wait-replicas", -1, "replicas that must acknowledge the submitting mark (Redis WAIT) before a create is sent; -1: 1 when the Redis master has replicas at start, else 0")
	fs.DurationVar(&d.waitTimeout, "wait-replicas-timeout", time.Second, "how long a create waits for the replicas' acknowledgement; without it the payout goes back to queued, nothing sent")
	fs.BoolVar(&d.requireDurable, "require-durable", false, "refuse to start unless Redis keeps the ledger through a crash (AOF with fsync always/everysec, or a replica)")
}

// apply reads how Redis keeps data, warns when a crash could lose the
// ledger's last writes, and sets the worker's replica wait.
func (d *durabilityFlags) apply(ctx context.Context, rdb redis.UniversalClient, cfg *worker.Config, log zerolog.Logger) error {
	if d.waitReplicas < -1 || d.waitTimeout <= 0 {
		return usageErr("--wait-replicas must be -1 (auto) or more, --wait-replicas-timeout positive")
	}
	dur, err := ledger.ReadDurability(ctx, rdb)
	if err != nil {
		return infraErr(err)
	}
	ev := log.Info()
	switch {
	case !dur.Known() && dur.Replicas == 0:
		ev = log.Warn()
		if d.requireDurable {
			return usageErr("--require-durable: Redis refuses CONFIG GET and has no replica, so the ledger's durability cannot be checked")
		}
	case !dur.Durable():
		ev = log.Warn()
		if d.requireDurable {
			return usageErr("--require-durable: Redis has no replica and appendonly=%s appendfsync=%s: a crash loses the ledger's last writes", dur.AppendOnly, dur.AppendFsync)
		}
	}
	ev.Int("replicas", dur.Replicas).Str("appendonly", dur.AppendOnly).Str("appendfsync", dur.AppendFsync).
		Bool("durable", dur.Durable()).Msg("redis durability of the ledger")
	cfg.WaitReplicas = d.waitReplicas
	if d.waitReplicas == -1 {
		cfg.WaitReplicas = min(dur.Replicas, 1)
	}
	cfg.WaitTimeout = d.waitTimeout
	return nil
}
