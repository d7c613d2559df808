package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/internal/worker"
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
	fourEyes  bool
	mf        manualFlags
}

// manualFlags are the PSP a manual resolution asks first (--as created,
// --as rejected: `payout resolve` and the console) and how the workers
// follow a payout marked created (their --track-outcome and
// --outcome-window, read the same way).
type manualFlags struct {
	pf            pspFlags
	trackOutcome  bool
	outcomeWindow time.Duration
}

func (m *manualFlags) register(fs *flag.FlagSet) {
	m.pf.register(fs)
	fs.BoolVar(&m.trackOutcome, "track-outcome", true, "as the workers': a payout marked created is followed to paid or failed (false: created is final)")
	fs.DurationVar(&m.outcomeWindow, "outcome-window", worker.DefaultConfig().Outcome.Window, "as the workers': a payout marked created without a final status after this long needs review again")
}

// window is the outcome window a payout marked created gets (0: final).
func (m *manualFlags) window() (time.Duration, error) {
	switch {
	case !m.trackOutcome:
		return 0, nil
	case m.outcomeWindow <= 0:
		return 0, usageErr("--outcome-window %s: must be positive", m.outcomeWindow)
	}
	return m.outcomeWindow, nil
}

// checker is the PSP client manual resolutions ask first; nil without
// --psp-url.
func (m *manualFlags) checker(e *env, log zerolog.Logger) (*psp.Client, error) {
	if m.pf.url == "" {
		return nil, nil
	}
	tokens, err := m.pf.tokenSource(e)
	if err != nil {
		return nil, err
	}
	c, err := psp.New(psp.Config{BaseURL: m.pf.url, Token: tokens, Timeout: m.pf.timeout, AmountAsNumber: m.pf.amountAsNumber,
		StatusIDByExternalID: m.pf.statusByExtID, Logger: log.With().Str("component", "psp").Logger()})
	if err != nil {
		return nil, configErr(err)
	}
	return c, nil
}

func (r *resolveFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.recheck, "recheck", false, "move the payout back to checking with a fresh budget of status checks and enqueue a status check (never a create)")
	fs.StringVar(&r.as, "as", "", "final decision: created (the PSP holds the order; give --psp-order) or rejected (it will not be paid)")
	fs.StringVar(&r.order, "psp-order", "", "with --as created: the PSP's order id")
	fs.StringVar(&r.pspStatus, "psp-status", "", "with --as created: the order status shown by the PSP (optional; the status the PSP answers is recorded)")
	fs.StringVar(&r.note, "note", "", "why: written to the result file's resolutionNote column (required)")
	fs.StringVar(&r.by, "by", "", "the operator deciding: only the operating system's user (SUDO_USER through sudo), the default; written to the result file's resolvedBy column")
	fs.BoolVar(&r.fourEyes, "four-eyes", false, "four-eyes policy of the deployment (PAYOUT_FOUR_EYES): --as created and --as rejected need a second person for every batch (a batch loaded under --four-eyes needs one whether this is given or not): the first person's decision is proposed, another person giving the same decision carries it out")
	r.mf.register(fs)
}

// decision is d as the operator package takes it.
func (r *resolveFlags) decision() operator.Resolution {
	d := operator.Resolution{To: lifecycle.State(r.as), OrderID: r.order, PSPStatus: r.pspStatus, FourEyes: r.fourEyes,
		Who: ledger.Resolution{By: strings.TrimSpace(r.by), Note: r.note}}
	if r.recheck {
		d.To = lifecycle.Checking
	}
	d.Who.OutcomeWindow, _ = r.mf.window() // checked by check
	return d
}

// check refuses contradictory flags before anything is connected; what
// the decision lacks (a note, an order id, a PSP) the command refuses
// (package operator), in the words the console uses.
func (r *resolveFlags) check() error {
	switch {
	case r.recheck && r.as != "":
		return usageErr("give either --recheck or --as, not both")
	case !r.recheck && r.as == "":
		return usageErr("say what to do: --recheck, --as created --psp-order ID, or --as rejected")
	case r.as != "" && r.as != string(lifecycle.Created) && r.as != string(lifecycle.Rejected):
		return usageErr("--as %q: want created or rejected", r.as)
	case r.as != string(lifecycle.Created) && (r.order != "" || r.pspStatus != ""):
		return usageErr("--psp-order and --psp-status go with --as created only")
	}
	_, err := r.mf.window()
	return err
}

// runResolve takes a payout out of needs_review on an operator's decision.
// With a batch only, it lists the batch's payouts that need review.
func runResolve(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "resolve", resolveSynopsis)
	var (
		lf logFlags
		rf redisFlags
		d  resolveFlags
		rl rolesFlags
	)
	lf.register(fs)
	rf.register(fs)
	d.register(fs)
	rl.register(fs)
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
	} else if err := rl.mayRead(ctx, e, "review"); err != nil {
		return err
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
	var checker operator.StatusChecker
	if d.as != "" {
		c, err := d.mf.checker(e, log)
		if err != nil {
			return err
		}
		if c != nil { // without --psp-url the command refuses (operator.ErrNoPSP)
			defer c.Close()
			checker = c
		}
	}
	acts, err := rl.actions(&operator.Actions{Ledger: l, Queue: queue.New(rdb), Log: log}, d.by)
	if err != nil {
		return err
	}
	return resolveOne(ctx, e.stdout, acts, checker, batch, fs.Arg(1), d)
}

// resolveOne applies decision d to payout ext of batch (operator's
// Resolve: the PSP asked first for --as, the next check enqueued) and
// prints its words.
func resolveOne(ctx context.Context, w io.Writer, acts *operator.Actions, c operator.StatusChecker, batch, ext string, d resolveFlags) error {
	r, err := acts.Resolve(ctx, c, batch, ext, d.decision())
	if errors.Is(err, operator.ErrNextNotEnqueued) {
		// The ledger has the decision; only the reminder is missing: the
		// workers' reconciler enqueues it (exit 0, as the UI shows it done).
		acts.Log.Warn().Err(err).Str("batch", batch).Str("externalId", ext).Msg("payout resolved; its next check is left to the reconciler")
		err = nil
	}
	if err != nil {
		return commandErr(err)
	}
	fmt.Fprintln(w, r.Words())
	return nil
}

// listReview prints the payouts of batch that need review, with their
// reasons.
func listReview(ctx context.Context, w io.Writer, l *ledger.Ledger, batch string) error {
	n := 0
	scale := batchScale(ctx, l, batch)
	err := view.New(l.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
		if p.State != lifecycle.NeedsReview {
			return nil
		}
		n++
		fmt.Fprintf(w, "%s  line %d  %s  %s  %s", p.ExternalID, p.Line, card.Scrub(p.Destination), money.FixedText(p.Amount, scale), card.Scrub(p.Error))
		if q := p.Proposal; q != nil {
			fmt.Fprintf(w, "  [%s proposed by %s, awaiting a second person]", q.To, term(q.By))
		}
		fmt.Fprintln(w)
		return nil
	})
	if err != nil {
		return infraErr(err)
	}
	if n == 0 {
		fmt.Fprintf(w, "no payout of batch %s needs review\n", batch)
		return nil
	}
	fmt.Fprintf(w, "%s: payout resolve %s EXTERNALID (--recheck | --as created --psp-order ID | --as rejected) --note TEXT\n",
		needReview(n), batch)
	return nil
}

// needReview says how many payouts need review, in words: "1 payout
// needs review", "2 payouts need review".
func needReview(n int) string {
	return fmt.Sprintf("%d %s", n, plural(n, "payout needs review", "payouts need review"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
