package cli

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
)

// runReconcile runs the reconciler's sweep once, the same sweep every
// worker runs periodically (--reconcile-interval), and prints what it
// restored or, with --dry-run, what it would restore.
func runReconcile(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "reconcile", "[flags]")
	var (
		lf     logFlags
		rf     redisFlags
		rl     rolesFlags
		dryRun bool
		cfg    reconcile.Config
	)
	lf.register(fs)
	rf.register(fs)
	rl.register(fs)
	fs.BoolVar(&dryRun, "dry-run", false, "only list the open payouts whose task is missing, archived, completed or lost (where nothing runs it); change nothing")
	fs.DurationVar(&cfg.Grace, "reconcile-grace", reconcile.DefaultGrace, "leave alone a payout changed more recently than this (a worker may be acting on it)")
	fs.DurationVar(&cfg.LeaseGrace, "reconcile-lease-grace", queue.DefaultLeaseGrace, leaseGraceUsage)
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if err := rl.mayRun(ctx, e, "reconcile", dryRunAction(dryRun, access.Reconcile)); err != nil {
		return err
	}
	log, rdb, err := logAndOpen(ctx, e, &lf, &rf)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rep, err := reconcile.New(rdb, ledger.New(rdb), cfg, log).Sweep(ctx, dryRun)
	if err != nil {
		return infraErr(err)
	}
	verb := "restored"
	if dryRun {
		verb = "would restore"
	}
	for _, r := range rep.Repairs {
		fmt.Fprintf(e.stdout, "%s %s %s: found %s, %s task %s\n", verb, r.Batch, r.ExternalID, r.Found, verb, r.Task)
	}
	for _, x := range rep.Expired {
		if dryRun {
			fmt.Fprintf(e.stdout, "would discard batch %s: %s\n", x.Batch, x.Reason)
		} else {
			fmt.Fprintf(e.stdout, "discarded batch %s: %s; %d payout(s) cancelled\n", x.Batch, x.Reason, x.Cancelled)
		}
	}
	fmt.Fprintf(e.stdout, "swept %d batch(es), %d open payout(s); %s %d task(s)\n", rep.Batches, rep.Open, verb, len(rep.Repairs))
	return nil
}

// leaseGraceUsage describes --reconcile-lease-grace.
const leaseGraceUsage = "an active task whose lease expired longer ago than this (or that has none) is lost, and its step restored; at least 90s, the time Asynq's own recoverer takes"

// dryRunAction is the action of a command that changes things as act, or
// with --dry-run only reads (access.Read).
func dryRunAction(dryRun bool, act access.Action) access.Action {
	if dryRun {
		return access.Read
	}
	return act
}
