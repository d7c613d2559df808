package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/operator"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

func runPause(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "pause", args, true)
}
func runResume(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, "resume", args, false)
}

// queueAction is the front shared by pause, resume and redeliver, the
// commands on a queue rather than a batch: Redis, the roles file, who acts
// (--by) and why (--note).
type queueAction struct {
	lf   logFlags
	rf   redisFlags
	rl   rolesFlags
	by   string
	note string
	who  string
}

// register adds the flags; verb says what --by does ("pauses the queue").
func (q *queueAction) register(fs *flag.FlagSet, verb string) {
	q.lf.register(fs)
	q.rf.register(fs)
	q.rl.register(fs)
	fs.StringVar(&q.by, "by", "", "who "+verb+": only the operating system's user (SUDO_USER through sudo), the default; recorded in the audit trail")
	fs.StringVar(&q.note, "note", "", "why (recorded in the audit trail)")
}

// open checks who runs the command, connects and binds the actions to
// who's roles (emit: the payout events' emitter, nil for none); the
// caller closes the returned client.
func (q *queueAction) open(ctx context.Context, e *env, emit func(redis.UniversalClient) *notify.Emitter) (redis.UniversalClient, *operator.Actions, error) {
	var err error
	if q.who, err = actorFor(e, q.by); err != nil {
		return nil, nil, err
	}
	rdb, err := q.rf.open(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	var em *notify.Emitter
	if emit != nil {
		em = emit(rdb)
	}
	acts, err := q.rl.actions(operator.New(rdb, em, zerolog.Nop()), q.who)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, acts, nil
}

// done prints what a queue command did, after the warning that its audit
// entry could not be written (unrecorded, nil when it was).
func (q *queueAction) done(e *env, words string, unrecorded error) {
	if unrecorded != nil {
		fmt.Fprintln(e.stderr, unrecorded)
	}
	fmt.Fprintln(e.stdout, words)
}

// setPaused pauses (pause) or resumes the payout queue: operator's Pause
// and Resume, as the web UI's Queues page does.
func setPaused(ctx context.Context, e *env, name string, args []string, pause bool) error {
	fs := newFlags(e, name, "[flags]")
	var (
		q  queueAction
		nf notifyFlags
	)
	q.register(fs, name+"s the queue")
	nf.register(fs)
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
	rdb, acts, err := q.open(ctx, e, nf.emitter)
	if err != nil {
		return err
	}
	defer rdb.Close()
	s := operator.QueueSwitch{By: q.who, Note: q.note, How: "payout " + name, LedgerReconciled: *reconciled}
	var r operator.SwitchedQueue
	if pause {
		r, err = acts.Pause(ctx, s)
	} else {
		r, err = acts.Resume(ctx, s)
	}
	if err != nil {
		return commandErr(err)
	}
	q.done(e, r.Words(), r.Unrecorded)
	return nil
}
