package cli

import (
	"context"
	"flag"
	"fmt"
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
	// run: payout run against a real PSP, which refuses a Redis that
	// may lose the ledger unless allowVolatile (--allow-volatile-redis).
	run           bool
	allowVolatile bool
}

func (d *durabilityFlags) register(fs *flag.FlagSet) {
	d.registerWait(fs)
	fs.BoolVar(&d.requireDurable, "require-durable", false, "refuse to start unless Redis keeps the ledger through a crash (AOF with fsync always/everysec, or a replica)")
}

// registerRun registers the flags of payout run, which requires a durable
// Redis against a real PSP unless told otherwise.
func (d *durabilityFlags) registerRun(fs *flag.FlagSet) {
	d.run = true
	d.registerWait(fs)
	fs.BoolVar(&d.allowVolatile, "allow-volatile-redis", false, "against a real PSP, run on a Redis that may lose the ledger's last writes in a crash (no AOF with fsync always/everysec, no replica); a rerun after such a crash can create orders again")
}

func (d *durabilityFlags) registerWait(fs *flag.FlagSet) {
	fs.IntVar(&d.waitReplicas, "wait-replicas", -1, "replicas that must acknowledge the submitting mark (Redis WAIT) before a create is sent; -1: 1 when the Redis master has replicas at start, else 0")
	fs.DurationVar(&d.waitTimeout, "wait-replicas-timeout", time.Second, "how long a create waits for the replicas' acknowledgement; without it the payout goes back to queued, nothing sent")
}

// refuses reports whether a Redis that may lose the ledger stops the command.
func (d *durabilityFlags) refuses() bool {
	return d.requireDurable || (d.run && !d.allowVolatile)
}

// apply reads how Redis keeps data, warns when a crash could lose the
// ledger's last writes (refuses, with --require-durable or in payout run),
// and sets the worker's replica wait.
func (d *durabilityFlags) apply(ctx context.Context, rdb redis.UniversalClient, cfg *worker.Config, log zerolog.Logger) error {
	if d.waitReplicas < -1 || d.waitTimeout <= 0 {
		return usageErr("--wait-replicas must be -1 (auto) or more, --wait-replicas-timeout positive")
	}
	cfg.WaitTimeout = d.waitTimeout
	dur, err := ledger.ReadDurability(ctx, rdb)
	if err != nil {
		if !d.refuses() && d.run {
			// Accepted volatile: a server that does not even answer
			// INFO replication (an emulator) is no reason to stop.
			log.Warn().Err(err).Msg("redis durability of the ledger unknown; --allow-volatile-redis: going on")
			cfg.WaitReplicas = max(d.waitReplicas, 0)
			return nil
		}
		return infraErr(err)
	}
	ev := log.Info()
	switch {
	case !dur.Known() && dur.Replicas == 0:
		ev = log.Warn()
		if d.refuses() {
			return d.refusal("Redis refuses CONFIG GET and has no replica, so the ledger's durability cannot be checked")
		}
	case !dur.Durable():
		ev = log.Warn()
		if d.refuses() {
			return d.refusal(fmt.Sprintf("Redis has no replica and appendonly=%s appendfsync=%s: a crash loses the ledger's last writes", dur.AppendOnly, dur.AppendFsync))
		}
	}
	ev.Int("replicas", dur.Replicas).Str("appendonly", dur.AppendOnly).Str("appendfsync", dur.AppendFsync).
		Bool("durable", dur.Durable()).Msg("redis durability of the ledger")
	cfg.WaitReplicas = d.waitReplicas
	if d.waitReplicas == -1 {
		cfg.WaitReplicas = min(dur.Replicas, 1)
	}
	return nil
}

// refusal is the usage error that says why the Redis is refused and how
// to fix it.
func (d *durabilityFlags) refusal(why string) error {
	if !d.run {
		return usageErr("--require-durable: %s", why)
	}
	return usageErr("against a real PSP, payout run needs a Redis that keeps the ledger through a crash: %s.\n"+
		"If it crashed, a rerun of the file could create orders again. Make it durable, then run again:\n"+
		"  - an append-only file: in redis.conf `appendonly yes` and `appendfsync always`\n"+
		"    (on a running server: redis-cli CONFIG SET appendonly yes; redis-cli CONFIG SET appendfsync always; redis-cli CONFIG REWRITE),\n"+
		"  - or a replica: run waits for it to acknowledge each mark (--wait-replicas, default -1: 1 when the master has replicas);\n"+
		"or, accepting that risk, give --allow-volatile-redis (PAYOUT_ALLOW_VOLATILE_REDIS=true)", why)
}
