package cli

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/scrub"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/jobs"
)

func runPause(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "pause", args, true)
}
func runResume(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "resume", args, false)
}

// setPaused does from the shell what the web UI's pause button does.
func setPaused(ctx context.Context, e *env, name string, args []string, pause bool) error {
	fs := newFlags(e, name, "[flags]")
	var (
		lf   logFlags
		rf   redisFlags
		by   string
		note string
		nf   notifyFlags
	)
	lf.register(fs)
	rf.register(fs)
	nf.register(fs)
	fs.StringVar(&by, "by", "", "who "+name+"s the queue: only the operating system's user (SUDO_USER through sudo), the default; recorded in the audit trail")
	fs.StringVar(&note, "note", "", "why (recorded in the audit trail)")
	reconciled := new(bool)
	if !pause {
		fs.BoolVar(reconciled, "ledger-reconciled", false, "clear a worker's finding that the ledger went back in time, after reconciling it with the PSP (docs/operations.md, PayoutLedgerRolledBack)")
	}
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if err := nf.check(e); err != nil {
		return err
	}
	if _, err := scrub.Note(note); err != nil {
		return usageErr("--note: %v", err)
	}
	who, err := actorFor(e, by)
	if err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if !pause {
		if err := clearRollback(ctx, e, rdb, *reconciled, who, note); err != nil {
			return err
		}
	}
	return switchQueue(ctx, e, rdb, nf, name, who, note, pause)
}

// switchQueue pauses (pause) or resumes the payout queue as who, with
// note, unless it is so already, audits and announces the change, and
// prints what waits in the queue.
func switchQueue(ctx context.Context, e *env, rdb redis.UniversalClient, nf notifyFlags, name, who, note string, pause bool) error {
	// A queue no task was ever put in is unknown to Asynq (NOT_FOUND):
	// register it, as its client's first enqueue does.
	if err := queue.RegisterQueue(ctx, rdb); err != nil {
		return infraErr(err)
	}
	q := queue.New(rdb)
	info, err := q.Info(ctx)
	if err != nil {
		return infraErr(err)
	}
	if info.Paused == pause {
		fmt.Fprintf(e.stdout, "queue %s is already %s\n", jobs.Queue, map[bool]string{true: "paused", false: "running"}[pause])
		return nil
	}
	if pause {
		err = q.Pause(ctx)
	} else {
		err = q.Resume(ctx)
	}
	if err != nil {
		return infraErr(err)
	}
	if err := operator.New(rdb, nf.emitter(rdb), zerolog.Nop()).QueueChanged(ctx, jobs.Queue, who, note, "payout "+name, pause); err != nil {
		fmt.Fprintln(e.stderr, err)
	}
	fmt.Fprintf(e.stdout, "queue %s %sd (%d pending, %d scheduled, %d retry)\n", jobs.Queue, name, info.Pending, info.Scheduled, info.Retry)
	return nil
}

// clearRollback refuses to resume while the ledger is marked as gone back
// in time, unless reconciled: then it clears the mark (audited).
func clearRollback(ctx context.Context, e *env, rdb redis.UniversalClient, reconciled bool, by, note string) error {
	l := ledger.New(rdb)
	what, found, err := l.RolledBack(ctx)
	if err != nil {
		return infraErr(err)
	}
	if !found {
		return nil
	}
	if !reconciled {
		return usageErr("the ledger went back in time (%s): workers create nothing until it is reconciled with the PSP.\n"+
			"Reconcile it (docs/operations.md, \"Alert: PayoutLedgerRolledBack\"), then run: payout resume --ledger-reconciled --note WHY", what)
	}
	if note == "" {
		return usageErr("--ledger-reconciled needs --note: how the ledger was reconciled (recorded in the audit trail)")
	}
	if _, err := l.ClearRollback(ctx, by, note); err != nil {
		return infraErr(err)
	}
	fmt.Fprintf(e.stdout, "ledger rollback mark cleared (%s); workers create again within %s\n", what, "5s")
	return nil
}
