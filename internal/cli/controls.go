package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// approvalFlags decide, on load and run, whether a batch waits for
// payout approve before any payment is sent.
type approvalFlags struct {
	mode      string
	by        string
	autoBelow string
	maxBatch  string
	daily     string
	fourEyes  bool
	rules     string
	expiry    time.Duration
	// roles: a person's load needs the maker role (--roles-file).
	roles rolesFlags
}

// approvalRulesUsage and approvalExpiryUsage are the flags of the
// approval rules and of the expiry of an approval request, on load, run
// and ui.
const (
	approvalRulesUsage  = "a file of approval rules (docs/controls.md#approval-rules): a batch a rule matches (by total, largest row, destination type) waits for that many distinct approvers of the rule's role, never its loader; the strictest matching rule applies and is recorded on the batch"
	approvalExpiryUsage = "a batch awaiting approval longer than this is discarded by the workers' reconciler with the reason \"approval expired after ...\" (recorded on the batch at load; 0: never)"
)

// defaultApprovalExpiry is how long a batch may await approval.
const defaultApprovalExpiry = 7 * 24 * time.Hour

// fourEyesUsage is the --four-eyes of load, run and approve: one policy
// for the deployment, PAYOUT_FOUR_EYES=true for every command.
const fourEyesUsage = "four-eyes policy: a batch loaded under it records that a second person must approve it, and payout approve and the UI refuse whoever loaded it (needs --by, or in spool mode the file's owner)"

func (a *approvalFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.fourEyes, "four-eyes", false, fourEyesUsage)
	a.roles.register(fs)
	fs.StringVar(&a.mode, "approval", "none", "none: a valid batch goes to the workers at once; required: it is registered and waits for payout approve (no payment before)")
	fs.StringVar(&a.by, "by", "", "who loads: only the operating system's user (SUDO_USER through sudo), the default, which is recorded; under --four-eyes that person cannot approve the batch. In spool mode files are loaded by their sender (docs/controls.md)")
	fs.StringVar(&a.autoBelow, "auto-approve-below", "", "with --approval required: a batch whose total is below this amount goes at once")
	fs.StringVar(&a.maxBatch, "max-batch-total", "", "a batch whose total is above this amount always waits for approval")
	fs.StringVar(&a.daily, "daily-limit", "", "a batch that would take the sum let go today (UTC) above this amount waits for approval; checked atomically across loaders")
	a.registerRules(fs)
}

// registerRules registers the approval rules and the expiry of an
// approval request (payout load and run, and payout api, whose other
// approval flags are worded for it).
func (a *approvalFlags) registerRules(fs *flag.FlagSet) {
	fs.StringVar(&a.rules, "approval-rules", "", approvalRulesUsage)
	fs.DurationVar(&a.expiry, "approval-expiry", defaultApprovalExpiry, approvalExpiryUsage)
}

func parseLimit(flagName, v string) (money.Amount, error) {
	if v == "" {
		return money.Zero, nil
	}
	a, err := money.Parse(v, 18)
	if err != nil || a.Cmp(money.Zero) <= 0 {
		return money.Zero, usageErr("--%s %q: want a positive amount such as 10000.00", flagName, v)
	}
	return a, nil
}

// options are the approval choices, By who runs the command (actorFor).
func (a *approvalFlags) options(e *env) (loader.Approval, error) {
	o, err := a.choices()
	if err != nil {
		return o, err
	}
	o.By, err = actorFor(e, a.by)
	return o, err
}

// choices are the approval choices without who loads (the UI's uploads
// record the signed-in person).
func (a *approvalFlags) choices() (loader.Approval, error) {
	var o loader.Approval
	switch a.mode {
	case "none":
	case "required":
		o.Required = true
	default:
		return o, usageErr("--approval %q: want none or required", a.mode)
	}
	o.FourEyes = a.fourEyes
	var err error
	if o.AutoBelow, err = parseLimit("auto-approve-below", a.autoBelow); err != nil {
		return o, err
	}
	if o.MaxBatchTotal, err = parseLimit("max-batch-total", a.maxBatch); err != nil {
		return o, err
	}
	if o.DailyLimit, err = parseLimit("daily-limit", a.daily); err != nil {
		return o, err
	}
	if a.expiry < 0 {
		return o, usageErr("--approval-expiry %s: want a positive duration such as 168h (or 0: never)", a.expiry)
	}
	o.Expiry = a.expiry
	if a.rules != "" {
		if o.Rules, err = approval.Load(a.rules); err != nil {
			return o, usageErr("--approval-rules %s: %v", a.rules, err)
		}
	}
	return o, nil
}

// operatorName is who takes an operator action: the operating system's
// user, which --by may only confirm (actorFor).
func operatorName(e *env, by string) (string, error) {
	return actorFor(e, by)
}

// runApprove lets a batch that awaits approval go to the workers.
func runApprove(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "approve", "[flags] BATCH-or-FILE")
	var (
		lf       logFlags
		rf       redisFlags
		by       string
		fourEyes bool
		daily    string
		note     string
		roles    rolesFlags
	)
	lf.register(fs)
	rf.register(fs)
	roles.register(fs)
	fs.StringVar(&note, "note", "", "why it may go, recorded in the batch's audit trail with the approval (optional; at most 1000 characters, on one line)")
	fs.StringVar(&by, "by", "", "who approves: only the operating system's user (SUDO_USER through sudo), the default; recorded")
	fs.BoolVar(&fourEyes, "four-eyes", false, "four-eyes policy of the deployment (PAYOUT_FOUR_EYES): refuse the person who loaded the batch for every batch, those loaded before batches recorded the policy included; a batch loaded under --four-eyes refuses its loader whether this is given or not")
	fs.StringVar(&daily, "daily-limit", "", "refuse when the approval would take the sum let go today (UTC) above this amount")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("approve takes one BATCH or FILE")
	}
	who, err := operatorName(e, by)
	if err != nil {
		return err
	}
	limit, err := parseLimit("daily-limit", daily)
	if err != nil {
		return err
	}
	log, rdb, err := logAndOpen(ctx, e, &lf, &rf)
	if err != nil {
		return err
	}
	defer rdb.Close()
	acts, err := roles.actions(operator.New(rdb, nil, log), who)
	if err != nil {
		return err
	}
	id, err := resolveBatch(ctx, acts.Ledger, fs.Arg(0))
	if err != nil {
		return err
	}
	// Roles: the operating system's user holds approver until the CLI
	// maps it through the roles file (package access).
	r, err := acts.Approve(ctx, id, ledger.Approval{By: who, FourEyes: fourEyes, DailyLimit: limit, Note: note})
	if errors.Is(err, operator.ErrNotEnqueued) {
		// The approval stands (the ledger is the truth): exit 0, as the UI
		// shows it done; approving again would be refused.
		log.Warn().Err(err).Str("batch", id).Str("by", who).Msg("batch approved; " + operator.LeftToReconciler)
		err = nil
	}
	if err != nil {
		return commandErr(err)
	}
	fmt.Fprintln(e.stdout, r.Words())
	return nil
}

// commandErr is how the command line ends on an operator command's error:
// a refusal (operator.ErrRefused) exits ExitRejected, or ExitUsage when
// an argument or a flag was missing or wrong (operator.ErrIncomplete,
// ErrNotFound, ErrNoPSP; ErrRolledBack, which wants --ledger-reconciled),
// with its words as they are; anything else is a
// fault.
func commandErr(err error) error {
	switch {
	case errors.Is(err, operator.ErrIncomplete), errors.Is(err, operator.ErrNotFound), errors.Is(err, operator.ErrNoPSP),
		errors.Is(err, operator.ErrRolledBack):
		return &exitError{ExitUsage, err}
	case errors.Is(err, operator.ErrRefused):
		return &exitError{ExitRejected, err}
	}
	return infraErr(err)
}

// operatorAction is the front shared by discard and cancel: Redis, who
// acts and the note, and the batch named by the first argument.
type operatorAction struct {
	rf    redisFlags
	roles rolesFlags
	by    string
	note  string
	who   string
	l     *ledger.Ledger
	batch string
}

func (o *operatorAction) register(fs *flag.FlagSet, verb string) {
	o.rf.register(fs)
	o.roles.register(fs)
	fs.StringVar(&o.by, "by", "", "who "+verb+": only the operating system's user (SUDO_USER through sudo), the default; recorded")
	fs.StringVar(&o.note, "note", "", "why (required; recorded)")
}

// open checks who runs the command, connects and resolves the batch; the
// caller closes the returned client (the note is checked by the command,
// package operator).
func (o *operatorAction) open(ctx context.Context, e *env, fs *flag.FlagSet) (redis.UniversalClient, error) {
	var err error
	if o.who, err = operatorName(e, o.by); err != nil {
		return nil, err
	}
	rdb, err := o.rf.open(ctx, e)
	if err != nil {
		return nil, err
	}
	o.l = ledger.New(rdb)
	if o.batch, err = resolveBatch(ctx, o.l, fs.Arg(0)); err != nil {
		rdb.Close()
		return nil, err
	}
	return rdb, nil
}

// runDiscard refuses a batch that awaits approval (every payout cancelled)
// or abandons an interrupted load (every payout cancelled, every claim
// released).
func runDiscard(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "discard", "[flags] BATCH-or-FILE")
	var o operatorAction
	o.register(fs, "discards")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("discard takes one BATCH or FILE")
	}
	rdb, err := o.open(ctx, e, fs)
	if err != nil {
		return err
	}
	defer rdb.Close()
	acts, err := o.roles.actions(operator.New(rdb, nil, zerolog.Nop()), o.who)
	if err != nil {
		return err
	}
	r, err := acts.Discard(ctx, o.batch, o.who, o.note)
	if err != nil {
		return commandErr(err)
	}
	fmt.Fprintln(e.stdout, r.Words())
	return nil
}

// runCancel cancels payouts that have not been sent yet (operator's
// Cancel, payout by payout): each payout named and cancelled, and each
// refusal, is printed with its words.
func runCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "cancel", "[flags] BATCH-or-FILE [EXTERNALID...]")
	var o operatorAction
	o.register(fs, "cancels")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageErr("cancel takes a BATCH or FILE and, optionally, the externalIds to cancel (default: every payout not sent yet)")
	}
	rdb, err := o.open(ctx, e, fs)
	if err != nil {
		return err
	}
	defer rdb.Close()
	acts, err := o.roles.actions(operator.New(rdb, nil, zerolog.Nop()), o.who)
	if err != nil {
		return err
	}
	ids := fs.Args()[1:]
	if len(ids) == 0 {
		if ids, err = acts.Cancellable(ctx, o.batch); err != nil {
			return commandErr(err)
		}
	}
	named := len(fs.Args()) > 1
	cancelled, refused, err := eachPayout(ids, func(ext string) (string, error) {
		r, err := acts.Cancel(ctx, o.batch, ext, o.who, o.note)
		return r.Words(), err
	}, func(words string) {
		if named {
			fmt.Fprintln(e.stdout, words)
		}
	})
	if err != nil && refused == 0 {
		return err
	}
	fmt.Fprintf(e.stdout, "batch %s: %d payouts cancelled by %s, %d not cancellable\n", o.batch, cancelled, o.who, refused)
	return err
}

// eachPayout runs act (cancel, release) on the payouts ids one by one and
// hands done the words of each it did: a refusal is kept and the next
// payout tried, while an incomplete command (no note) or a fault stops at
// once. It returns how many were done and refused, and the error to exit
// with: the refusals together (exit 1, each printed with its words), else
// the one that stopped it.
func eachPayout(ids []string, act func(ext string) (string, error), done func(words string)) (did, refused int, err error) {
	var refusals problemList
	for _, ext := range ids {
		words, err := act(ext)
		switch {
		case errors.Is(err, operator.ErrIncomplete):
			return did, 0, commandErr(err)
		case errors.Is(err, operator.ErrRefused):
			refusals = append(refusals, err)
		case err != nil:
			return did, 0, infraErr(err)
		default:
			did++
			done(words)
		}
	}
	if len(refusals) > 0 {
		return did, len(refusals), &exitError{ExitRejected, refusals}
	}
	return did, 0, nil
}
