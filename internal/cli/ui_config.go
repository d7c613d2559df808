package cli

import (
	"flag"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// uiConfig reads the UI credentials from the environment only: they never
// appear on a command line (and so never in ps output). usersFile, when
// set, is the users file of named logins (--users), whose hashes are read
// now: an error is a configuration error (ui.UsersFileError).
func uiConfig(e *env, addr string, readOnly, insecure bool, prom, usersFile string, log zerolog.Logger) (ui.Config, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	cfg := ui.Config{
		User: e.getenv("PAYOUT_UI_USER"), Password: e.getenv("PAYOUT_UI_PASSWORD"), Token: e.getenv("PAYOUT_UI_TOKEN"),
		ReadOnly: readOnly, InsecureLocal: insecure, Addr: addr, PrometheusAddr: prom, Logger: log, Registry: reg,
	}
	if usersFile == "" {
		return cfg, nil
	}
	users, err := ui.LoadUsers(usersFile, log)
	if err != nil {
		return cfg, err
	}
	cfg.Users = users
	log.Info().Str("file", usersFile).Int("users", users.Len()).Msg("ui: named logins read")
	return cfg, nil
}

// uiControlFlags are what the UI's Approve, Discard and upload do: the
// checks of payout approve, the notifications, and, with --spool, the
// options a spool run loads uploads with.
type uiControlFlags struct {
	nf         notifyFlags
	mf         manualFlags
	ff         fileFlags
	kf         keyFlags
	approval   string
	autoBelow  string
	rules      string
	expiry     time.Duration
	maxBatch   string
	daily      string
	fourEyes   bool
	require    bool
	spool      string
	maxUpload  int64
	maxUploads int
	vf         velocityFlags
	relf       releaseFlags
}

func (u *uiControlFlags) register(fs *flag.FlagSet) {
	u.nf.register(fs)
	u.mf.register(fs)
	u.ff.register(fs)
	u.kf.register(fs)
	fs.StringVar(&u.approval, "approval", "none", "uploads: none: a confirmed upload goes to the workers at once; required: it waits for Approve")
	fs.StringVar(&u.autoBelow, "auto-approve-below", "", "uploads, with --approval required: a batch whose total is below this amount goes at once")
	fs.StringVar(&u.maxBatch, "max-batch-total", "", "uploads: a batch whose total is above this amount always waits for approval")
	fs.StringVar(&u.rules, "approval-rules", "", "uploads: "+approvalRulesUsage)
	fs.DurationVar(&u.expiry, "approval-expiry", defaultApprovalExpiry, "uploads: "+approvalExpiryUsage)
	fs.StringVar(&u.daily, "daily-limit", "", "Approve refuses, and an upload waits for approval, when it would take the sum let go today (UTC) above this amount")
	fs.BoolVar(&u.fourEyes, "four-eyes", false, "Approve refuses when the signed-in user loaded the batch, and mark created / mark rejected need a second person; needs one login per person (--users, or PAYOUT_UI_USER/PAYOUT_UI_PASSWORD in a UI per person; no PAYOUT_UI_TOKEN, no --insecure-local)")
	u.vf.register(fs)
	u.relf.registerRules(fs)
	fs.BoolVar(&u.require, "require-control", false, "uploads: refuse a file whose control totals are not typed in the upload form")
	fs.StringVar(&u.spool, "spool", "", "spool directory of payout load --spool: enables the upload form; uploads wait in DIR/staging/ for their confirmation, then go to done/ or failed/ with their errors in outbox/")
	fs.Int64Var(&u.maxUpload, "max-upload-bytes", ui.DefaultUploadLimit, "largest file the upload form accepts")
	fs.IntVar(&u.maxUploads, "max-uploads", ui.DefaultMaxUploads, "uploads handled at once; one more is answered 503 with Retry-After")
}

// prepared is what the flags give once checked.
type preparedUI struct {
	daily    money.Amount
	approval loader.Approval
	velocity loader.Velocity
	release  loader.Release
	file     payfile.Options
	ring     loader.Sealer
	psp      operator.StatusChecker // nil: marking created or rejected is refused
	window   time.Duration          // the outcome window of a payout marked created
}

// prepare checks the flags before any connection is made.
func (u *uiControlFlags) prepare(e *env) (p preparedUI, err error) {
	if err := u.nf.check(e); err != nil {
		return p, err
	}
	if p.daily, err = parseLimit("daily-limit", u.daily); err != nil {
		return p, err
	}
	if u.maxUploads < 1 {
		return p, usageErr("--max-uploads %d: want at least 1 (uploads handled at once)", u.maxUploads)
	}
	if p.window, err = u.mf.window(); err != nil {
		return p, err
	}
	if c, err := u.mf.checker(e, zerolog.Nop()); err != nil {
		return p, err
	} else if c != nil {
		p.psp = c
	}
	if u.spool == "" {
		return p, nil
	}
	if u.maxUpload <= 0 {
		return p, usageErr("--max-upload-bytes %d: want a positive size", u.maxUpload)
	}
	af := approvalFlags{mode: u.approval, autoBelow: u.autoBelow, maxBatch: u.maxBatch, daily: u.daily, fourEyes: u.fourEyes,
		rules: u.rules, expiry: u.expiry}
	if p.approval, err = af.choices(); err != nil {
		return p, err
	}
	if p.velocity, err = u.vf.options(); err != nil {
		return p, err
	}
	if p.file, err = u.ff.options(); err != nil {
		return p, err
	}
	p.file.PayDateColumn = u.relf.column
	if p.release, err = u.relf.options(); err != nil {
		return p, err
	}
	if p.ring, err = u.kf.keyring(e); err != nil {
		return p, err
	}
	return p, nil
}

// configure gives cfg the operator's actions and, with --spool, the
// upload.
func (u *uiControlFlags) configure(p preparedUI, cfg *ui.Config, rdb redis.UniversalClient, log zerolog.Logger) {
	acts := operator.New(rdb, u.nf.emitter(rdb), log)
	cfg.Controls = operator.UIControls{Actions: acts, FourEyes: u.fourEyes, DailyLimit: p.daily, PSP: p.psp, OutcomeWindow: p.window}
	if u.spool == "" {
		return
	}
	ld := loader.New(ledger.New(rdb), queue.New(rdb), p.ring, log)
	ld.Notify = u.nf.emitter(rdb)
	cfg.Uploads = operator.UIUploads{Loader: ld, Spool: u.spool, Options: loader.SpoolOptions{
		Load: loader.Options{File: p.file, Approval: p.approval, Velocity: p.velocity, Release: p.release, RequireControl: u.require}, Settle: time.Second}}
	cfg.UploadLimit = u.maxUpload
	cfg.MaxUploads = u.maxUploads
}
