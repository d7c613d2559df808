package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// resolveSynopsis is the usage line of `payout resolve`.
const resolveSynopsis = "[flags] BATCH-or-FILE [EXTERNALID] (--recheck | --as created --psp-order ID | --as rejected) --note TEXT [--by NAME]"

// resolveFlags are the decision of `payout resolve`.
type resolveFlags struct {
	recheck   bool
	as        string
	order     string
	pspStatus string
	note      string
	by        string
}

func (r *resolveFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.recheck, "recheck", false, "move the payout back to checking with a fresh budget of status checks and enqueue a status check (never a create)")
	fs.StringVar(&r.as, "as", "", "final decision: created (the PSP holds the order; give --psp-order) or rejected (it will not be paid)")
	fs.StringVar(&r.order, "psp-order", "", "with --as created: the PSP's order id")
	fs.StringVar(&r.pspStatus, "psp-status", "", "with --as created: the order status shown by the PSP (optional)")
	fs.StringVar(&r.note, "note", "", "why: written to the result file's resolutionNote column (required)")
	fs.StringVar(&r.by, "by", "", "the operator deciding: only the operating system's user (SUDO_USER through sudo), the default; written to the result file's resolvedBy column")
}

// check refuses an incomplete or contradictory decision before anything
// is connected.
func (r *resolveFlags) check() error {
	switch {
	case r.recheck && r.as != "":
		return usageErr("give either --recheck or --as, not both")
	case !r.recheck && r.as == "":
		return usageErr("say what to do: --recheck, --as created --psp-order ID, or --as rejected")
	case r.as != "" && r.as != string(ledger.Created) && r.as != string(ledger.Rejected):
		return usageErr("--as %q: want created or rejected", r.as)
	case r.as == string(ledger.Created) && strings.TrimSpace(r.order) == "":
		return usageErr("--as created needs --psp-order, the PSP's order id")
	case r.as != string(ledger.Created) && (r.order != "" || r.pspStatus != ""):
		return usageErr("--psp-order and --psp-status go with --as created only")
	case strings.TrimSpace(r.note) == "":
		return usageErr("--note is required: say why, for the result file")
	}
	return nil
}

// runResolve takes a payout out of needs_review on an operator's decision.
// With a batch only, it lists the batch's payouts that need review.
func runResolve(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "resolve", resolveSynopsis)
	var (
		lf logFlags
		rf redisFlags
		d  resolveFlags
	)
	lf.register(fs)
	rf.register(fs)
	d.register(fs)
	if err := parse(e, fs, args); err != nil {
		return err
	}
	listOnly := fs.NArg() == 1 && !d.recheck && d.as == ""
	if !listOnly {
		if fs.NArg() != 2 {
			fs.Usage()
			return usageErr("give a batch id (or its payout file) and an externalId")
		}
		if err := d.check(); err != nil {
			return err
		}
		who, err := actorFor(e, d.by)
		if err != nil {
			return err
		}
		d.by = who
	}
	log, rdb, err := logAndOpen(ctx, e, &lf, &rf)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l := ledger.New(rdb)
	batch, err := resolveBatch(ctx, l, fs.Arg(0))
	if err != nil {
		return err
	}
	if listOnly {
		return listReview(ctx, e.stdout, l, batch)
	}
	return resolveOne(ctx, e.stdout, log, l, asynq.NewClientFromRedisClient(rdb), batch, fs.Arg(1), d)
}

// resolveOne applies decision d to payout ext of batch and, after a
// recheck, enqueues the status check.
func resolveOne(ctx context.Context, w io.Writer, log zerolog.Logger, l *ledger.Ledger, client *asynq.Client, batch, ext string, d resolveFlags) error {
	who := ledger.Resolution{By: strings.TrimSpace(d.by), Note: d.note}
	var (
		r   ledger.Resolved
		err error
	)
	switch {
	case d.recheck:
		r, err = l.Recheck(ctx, batch, ext, who)
	case d.as == string(ledger.Created):
		r, err = l.ResolveAsCreated(ctx, batch, ext, strings.TrimSpace(d.order), d.pspStatus, who)
	default:
		r, err = l.ResolveAsRejected(ctx, batch, ext, who)
	}
	var conflict *ledger.ConflictError
	switch {
	case errors.As(err, &conflict):
		return &exitError{ExitRejected, fmt.Errorf("payout %s of batch %s is %s, not %s: nothing changed (only a payout that needs review can be resolved)",
			ext, batch, conflict.Found, ledger.NeedsReview)}
	case errors.Is(err, ledger.ErrNotFound):
		return usageErr("batch %s has no payout %q", batch, ext)
	case errors.Is(err, ledger.ErrBadResolution):
		return usageErr("%v", err)
	case err != nil:
		return infraErr(err)
	}
	p := r.Payout
	log.Info().Str("batch", batch).Str("externalId", ext).Str("from", string(r.From)).Str("to", string(r.To)).
		Str("by", who.By).Msg("payout resolved by an operator")
	fmt.Fprintf(w, "%s  %s  %s  %s -> %s", ext, card.Scrub(p.Destination), money.FixedText(p.Amount, batchScale(ctx, l, batch)), r.From, r.To)
	if r.To == ledger.Created {
		fmt.Fprintf(w, " (PSP order %s)", p.OrderID)
	}
	fmt.Fprintf(w, "  by %s: %s\n", p.ResolvedBy, card.Scrub(p.ResolutionNote))
	if r.To != ledger.Checking {
		return nil
	}
	t, err := jobs.NewStatusTask(jobs.StatusPayload{
		Batch: batch, ExternalID: ext, Seq: r.Seq, Amount: p.Amount, Destination: p.Destination,
	}, 0)
	if err == nil {
		_, err = jobs.Enqueue(ctx, client, t)
	}
	if err != nil {
		// The ledger says checking with seq r.Seq; only the reminder is
		// missing. It is safe to enqueue it again by hand or by a sweep.
		return infraErr(fmt.Errorf("payout %s is checking now, but its status check %d could not be enqueued (task %s): %w",
			ext, r.Seq, jobs.StatusTaskID(ext, r.Seq), err))
	}
	fmt.Fprintf(w, "status check %d enqueued (task %s)\n", r.Seq, jobs.StatusTaskID(ext, r.Seq))
	return nil
}

// listReview prints the payouts of batch that need review, with their
// reasons.
func listReview(ctx context.Context, w io.Writer, l *ledger.Ledger, batch string) error {
	n := 0
	scale := batchScale(ctx, l, batch)
	err := l.Each(ctx, batch, func(p ledger.Payout) error {
		if p.State != ledger.NeedsReview {
			return nil
		}
		n++
		fmt.Fprintf(w, "%s  line %d  %s  %s  %s\n", p.ExternalID, p.Line, card.Scrub(p.Destination), money.FixedText(p.Amount, scale), card.Scrub(p.Error))
		return nil
	})
	if err != nil {
		return infraErr(err)
	}
	if n == 0 {
		fmt.Fprintf(w, "no payout of batch %s needs review\n", batch)
		return nil
	}
	fmt.Fprintf(w, "%d %s need review: payout resolve %s EXTERNALID (--recheck | --as created --psp-order ID | --as rejected) --note TEXT\n",
		n, plural(n, "payout", "payouts"), batch)
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
