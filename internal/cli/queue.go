package cli

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/operator"
	"github.com/rs/zerolog"
)

func runPause(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "pause", args, true)
}
func runResume(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "resume", args, false)
}

// setPaused pauses (pause) or resumes the payout queue: operator's Pause
// and Resume, as the web UI's Queues page does.
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
	who, err := actorFor(e, by)
	if err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	acts := operator.New(rdb, nf.emitter(rdb), zerolog.Nop())
	s := operator.QueueSwitch{By: who, Note: note, How: "payout " + name, LedgerReconciled: *reconciled}
	var r operator.SwitchedQueue
	if pause {
		r, err = acts.Pause(ctx, s)
	} else {
		r, err = acts.Resume(ctx, s)
	}
	if err != nil {
		return commandErr(err)
	}
	if r.Unrecorded != nil {
		fmt.Fprintln(e.stderr, r.Unrecorded)
	}
	fmt.Fprintln(e.stdout, r.Words())
	return nil
}
