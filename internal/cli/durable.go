package cli

import (
	"context"
	"flag"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/redisconn"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// durabilityFlags decide whether the ledger's Redis is safe to pay from:
// worker, load and run refuse a Redis that can go back in time (no AOF
// synced on every write and no replica acknowledging the submitting mark)
// unless --allow-volatile-redis accepts the risk (docs/operations.md,
// "Durability").
type durabilityFlags struct {
	waitReplicas   int
	waitTimeout    time.Duration
	allowVolatile  bool
	requireDurable bool // --require-durable: deprecated, the default now
	cmd            string
}

// register registers the flags of payout worker.
func (d *durabilityFlags) register(fs *flag.FlagSet) {
	d.cmd = "worker"
	d.registerWait(fs)
	d.registerAllow(fs)
	fs.BoolVar(&d.requireDurable, "require-durable", false, "deprecated, does nothing: a Redis that can lose the ledger's last writes is refused by default (see --allow-volatile-redis)")
}

// registerRun registers the flags of payout run (not checked with
// --sandbox on the embedded Redis, which is in memory by design).
func (d *durabilityFlags) registerRun(fs *flag.FlagSet) {
	d.cmd = "run"
	d.registerWait(fs)
	d.registerAllow(fs)
}

// registerLoad registers the flag of payout load.
func (d *durabilityFlags) registerLoad(fs *flag.FlagSet) {
	d.cmd = "load"
	d.registerAllow(fs)
}

func (d *durabilityFlags) registerAllow(fs *flag.FlagSet) {
	fs.BoolVar(&d.allowVolatile, "allow-volatile-redis", false, "accept a Redis that may lose the ledger's last writes in a crash (no AOF with appendfsync always, no replica): a crash can then create orders again; every log line says durability=volatile-accepted")
}

func (d *durabilityFlags) registerWait(fs *flag.FlagSet) {
	fs.IntVar(&d.waitReplicas, "wait-replicas", -1, "replicas that must acknowledge the submitting mark (Redis WAIT) before a create is sent; -1: 1 when the Redis master has replicas at start, else 0")
	fs.DurationVar(&d.waitTimeout, "wait-replicas-timeout", time.Second, "how long a create waits for the replicas' acknowledgement; without it the payout goes back to queued, nothing sent")
}

// logger marks every line of log when the risk is accepted: whoever reads
// any line of a worker on a volatile Redis learns it.
func (d *durabilityFlags) logger(log zerolog.Logger) zerolog.Logger {
	if !d.allowVolatile {
		return log
	}
	return log.With().Str("durability", "volatile-accepted").Logger()
}

// apply checks the Redis of a worker or a run (check), refuses a ledger
// already found gone back in time, and sets the worker's replica wait.
func (d *durabilityFlags) apply(ctx context.Context, rdb redis.UniversalClient, cfg *worker.Config, log zerolog.Logger) error {
	if d.waitReplicas < -1 || d.waitTimeout <= 0 {
		return usageErr("--wait-replicas must be -1 (auto) or more, --wait-replicas-timeout positive")
	}
	cfg.WaitTimeout = d.waitTimeout
	if err := refuseRolledBack(ctx, rdb); err != nil {
		return err
	}
	dur, err := d.check(ctx, rdb, log)
	if err != nil {
		return err
	}
	cfg.WaitReplicas = d.waitReplicas
	if d.waitReplicas == -1 {
		cfg.WaitReplicas = min(dur.Replicas, 1)
	}
	return nil
}

// check reads how Redis keeps the ledger and refuses a Redis that can go
// back in time, unless the risk is accepted (then it warns).
func (d *durabilityFlags) check(ctx context.Context, rdb redis.UniversalClient, log zerolog.Logger) (redisconn.Durability, error) {
	if d.requireDurable {
		log.Warn().Msg("--require-durable is deprecated and does nothing: durability is required by default")
	}
	dur, err := redisconn.ReadDurability(ctx, rdb)
	if err != nil {
		if d.allowVolatile {
			// Accepted volatile: a server that does not even answer
			// INFO replication (an emulator) is no reason to stop.
			log.Warn().Err(err).Msg("redis durability of the ledger unknown; --allow-volatile-redis: going on")
			return dur, nil
		}
		return dur, infraErr(err)
	}
	// A replica keeps the mark only if the worker waits for it.
	wait := d.waitReplicas != 0 || d.cmd == "load"
	safe, why := dur.Safe(wait)
	ev := log.Info()
	if !safe {
		if !d.allowVolatile {
			return dur, d.refusal(why)
		}
		ev = log.Warn().Str("risk", why)
	}
	ev.Int("replicas", dur.Replicas).Str("appendonly", dur.AppendOnly).Str("appendfsync", dur.AppendFsync).
		Bool("durable", safe).Msg("redis durability of the ledger")
	return dur, nil
}

// refuseRolledBack refuses to start on a ledger a worker found gone back
// in time, until an operator reconciled it with the PSP and cleared the
// mark (`payout resume --ledger-reconciled`).
func refuseRolledBack(ctx context.Context, rdb redis.UniversalClient) error {
	rb, found, err := ledger.New(rdb).RolledBack(ctx)
	if err != nil {
		return infraErr(err)
	}
	if !found {
		return nil
	}
	return usageErr("the ledger went back in time (%s): creating now could pay again.\n"+
		"Reconcile it with the PSP's orders first (docs/operations.md, \"Alert: PayoutLedgerRolledBack\"), then clear this with\n"+
		"  payout resume --ledger-reconciled --note WHY", rb)
}

// refusal is the usage error that says why the Redis is refused and how
// to fix it.
func (d *durabilityFlags) refusal(why string) error {
	wait := "a replica that acknowledges every submitting mark: workers wait for it (WAIT, --wait-replicas, default -1: 1 when the master has replicas)"
	return usageErr("payout %s needs a Redis that keeps the ledger through a crash: %s.\n"+
		"A ledger that goes back in time (restarted from an older snapshot) makes payout create the same orders again. Make it durable, then start again:\n"+
		"  - an append-only file synced on every write: in redis.conf `appendonly yes` and `appendfsync always`\n"+
		"    (on a running server: redis-cli CONFIG SET appendonly yes; redis-cli CONFIG SET appendfsync always; redis-cli CONFIG REWRITE),\n"+
		"  - or %s;\n"+
		"or, accepting that risk, give --allow-volatile-redis (PAYOUT_ALLOW_VOLATILE_REDIS=true): every log line then says durability=volatile-accepted",
		d.cmd, why, wait)
}
