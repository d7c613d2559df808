package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/api"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/operator"
	"github.com/rs/zerolog"
)

// apiFlags are the flags of payout api: its listener and limits, and what
// a batch created through it is loaded with (the flags of payout load
// and of the UI's actions, by the same names).
type apiFlags struct {
	lf       logFlags
	rf       redisFlags
	kf       keyFlags
	ff       fileFlags
	nf       notifyFlags
	mf       manualFlags
	df       durabilityFlags
	af       approvalFlags
	vf       velocityFlags
	relf     releaseFlags
	ef       enqueueFlags
	addr     string
	staging  string
	maxBody  int64
	maxItems int
	rate     int
}

func (a *apiFlags) register(fs *flag.FlagSet) {
	a.lf.register(fs)
	a.rf.register(fs)
	a.kf.register(fs)
	a.ff.register(fs)
	a.nf.register(fs)
	a.mf.register(fs)
	a.ef.register(fs)
	a.df.cmd = "api"
	a.df.registerAllow(fs)
	fs.BoolVar(&a.af.fourEyes, "four-eyes", false, fourEyesUsage)
	fs.StringVar(&a.af.mode, "approval", "none", "none: a valid batch goes to the workers at once; required: it is registered and waits for an approval (POST .../approve)")
	fs.StringVar(&a.af.autoBelow, "auto-approve-below", "", "with --approval required: a batch whose total is below this amount goes at once")
	fs.StringVar(&a.af.maxBatch, "max-batch-total", "", "a batch whose total is above this amount always waits for approval")
	fs.StringVar(&a.af.daily, "daily-limit", "", "a batch that would take the sum let go today (UTC) above this amount waits for approval, and an approval above it is refused")
	a.af.registerRules(fs)
	a.vf.register(fs)
	a.relf.registerRules(fs)
	fs.StringVar(&a.addr, "addr", "127.0.0.1:8081", "address the API listens on (/api/v1; put TLS in front of it)")
	fs.StringVar(&a.staging, "staging", "", "folder where a create's items are written as a CSV file while it loads (default: the system's temporary folder)")
	fs.Int64Var(&a.maxBody, "max-body-bytes", api.DefaultMaxBody, "largest request body; a larger one is answered 413")
	fs.IntVar(&a.maxItems, "max-items", api.DefaultMaxItems, "most items in one batch")
	fs.IntVar(&a.rate, "rate", api.DefaultRate, "requests a second per API token (shared by every payout api process); more are answered 429 with Retry-After")
}

// runAPI serves the HTTP API (package api) until interrupted.
func runAPI(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "api", "[flags]")
	var a apiFlags
	a.register(fs)
	if err := parse(e, fs, args); err != nil {
		return err
	}
	cfg, err := a.config(e)
	if err != nil {
		return err
	}
	log, rdb, err := logAndOpen(ctx, e, &a.lf, &a.rf)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if _, err := a.df.check(ctx, rdb, log); err != nil {
		return err
	}
	ring, err := a.kf.keyring(e)
	if err != nil {
		return err
	}
	led := ledger.New(rdb)
	if err := recordDataKey(ctx, led, ring); err != nil {
		return err
	}
	// The enqueues of a create as payout load's: concurrent and
	// autopipelined (--enqueue-concurrency, --redis-pipeline).
	q, err := a.ef.queue(rdb)
	if err != nil {
		return err
	}
	ld := loader.New(led, q, ring, log)
	ld.Notify = a.nf.emitter(rdb)
	cfg.Redis, cfg.Loader, cfg.Log = rdb, ld, log
	cfg.Actions = operator.New(rdb, a.nf.emitter(rdb), log)
	cfg.Console = operator.NewConsole(rdb)
	cfg.Console.Queue = rdb
	srv, err := api.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Serve(ctx, a.addr); err != nil {
		return infraErr(fmt.Errorf("api: %w", err))
	}
	return nil
}

// config checks the flags into the API's configuration (no connection
// made yet).
func (a *apiFlags) config(e *env) (api.Config, error) {
	var cfg api.Config
	if err := a.nf.check(e); err != nil {
		return cfg, err
	}
	if a.maxBody <= 0 || a.maxItems <= 0 || a.rate <= 0 {
		return cfg, usageErr("--max-body-bytes, --max-items and --rate: want positive numbers")
	}
	approval, err := a.af.choices()
	if err != nil {
		return cfg, err
	}
	fopts, err := a.ff.options()
	if err != nil {
		return cfg, err
	}
	if cfg.OutcomeWindow, err = a.mf.window(); err != nil {
		return cfg, err
	}
	if c, err := a.mf.checker(e, zerolog.Nop()); err != nil {
		return cfg, err
	} else if c != nil {
		cfg.PSP = c
	}
	if a.ef.concurrency < 1 {
		return cfg, usageErr("--enqueue-concurrency %d: want at least 1", a.ef.concurrency)
	}
	fopts.PayDateColumn = a.relf.column
	release, err := a.relf.options()
	if err != nil {
		return cfg, err
	}
	velocity, err := a.vf.options()
	if err != nil {
		return cfg, err
	}
	cfg.Load = loader.Options{File: fopts, Approval: approval, EnqueueWorkers: a.ef.concurrency, Velocity: velocity, Release: release}
	cfg.FourEyes, cfg.DailyLimit = approval.FourEyes, approval.DailyLimit
	cfg.Staging, cfg.MaxBody, cfg.MaxItems, cfg.Rate = a.staging, a.maxBody, a.maxItems, a.rate
	return cfg, nil
}

// runToken manages API tokens: create NAME --role ROLE, list, revoke NAME.
func runToken(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "token", "create NAME --role ROLE | list | revoke NAME")
	var (
		lf   logFlags
		rf   redisFlags
		rl   rolesFlags
		role string
	)
	lf.register(fs)
	rf.register(fs)
	rl.register(fs)
	fs.StringVar(&role, "role", "", "token create: the token's role: viewer, maker, approver or operator")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usageErr("payout token create NAME --role ROLE | list | revoke NAME")
	}
	r, err := tokenRole(fs.Arg(0), role)
	if err != nil {
		return err
	}
	who, err := tokenAdmin(ctx, e, &rl)
	if err != nil {
		return err
	}
	_, rdb, err := logAndOpen(ctx, e, &lf, &rf)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return tokenCommand(ctx, e, api.NewTokens(rdb), fs.Arg(0), fs.Args()[1:], r, who)
}

// tokenRole checks --role before anything is opened: token create needs
// one of the roles a token may hold (not admin); list and revoke take
// none.
func tokenRole(sub, role string) (access.Role, error) {
	if sub != "create" {
		if role != "" {
			return "", usageErr("--role is for token create; token %s takes none", sub)
		}
		return "", nil
	}
	if strings.TrimSpace(role) == "" {
		return "", usageErr("token create needs --role: viewer, maker, approver or operator")
	}
	r, err := access.ParseRole(role)
	if err != nil {
		return "", usageErr("--role: %v", err)
	}
	if r == access.Admin {
		return "", usageErr("--role: %v", api.ErrTokenRole)
	}
	return r, nil
}

// tokenAdmin is who manages tokens: the operating system's user, refused
// by operator.Check unless the roles file (--roles-file, PAYOUT_ROLES_FILE;
// PAYOUT_ROLES still read) gives them admin. Without a roles file whoever
// runs the command administers, as before roles existed.
func tokenAdmin(ctx context.Context, e *env, rl *rolesFlags) (string, error) {
	who, err := actor(e, "")
	if err != nil {
		return "", err
	}
	p, err := rl.principal(who)
	if err != nil {
		return "", err
	}
	if rl.file == "" {
		p.Roles |= access.Of(access.Admin)
	}
	if _, err := operator.Check(ctx, p, "token", access.Administer, who); err != nil {
		return "", commandErr(err)
	}
	return who, nil
}

// tokenCommand runs one token subcommand.
func tokenCommand(ctx context.Context, e *env, ts api.Tokens, sub string, args []string, role access.Role, who string) error {
	switch {
	case sub == "create" && len(args) == 1:
		secret, t, err := ts.Create(ctx, args[0], role, who)
		if err != nil {
			return usageErr("token %s: %v", args[0], err)
		}
		fmt.Fprintf(e.stderr, "token %s created with role %s; it acts as %s. It is shown once, now: store it as a secret.\n", t.Name, t.Role, t.Principal().Name)
		fmt.Fprintln(e.stdout, secret)
		return nil
	case sub == "list" && len(args) == 0:
		list, err := ts.List(ctx)
		if err != nil {
			return infraErr(err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tBY")
		for _, t := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Role, t.CreatedAt.UTC().Format(time.RFC3339), t.CreatedBy)
		}
		return tw.Flush()
	case sub == "revoke" && len(args) == 1:
		if err := ts.Revoke(ctx, args[0]); err != nil {
			return usageErr("token %s: %v", args[0], err)
		}
		fmt.Fprintf(e.stdout, "token %s revoked by %s: requests with it are refused from now on\n", args[0], who)
		return nil
	}
	return usageErr("payout token create NAME --role ROLE | list | revoke NAME")
}
