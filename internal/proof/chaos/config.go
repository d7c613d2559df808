package chaos

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/acme/payout/internal/flagenv"

	"github.com/acme/payout/internal/sandbox"
)

// Config sizes and times one chaos run. Every time is counted from the
// start of the run (the moment the PSP sandbox starts, so that its outage
// window lines up with the rest).
type Config struct {
	Rows        int // payout rows in all, split evenly over Files
	Files       int // payout files dropped into the spool inbox
	Workers     int // worker processes running at once
	Concurrency int // payouts each worker processes at once

	DropEvery   time.Duration // a new file lands in the inbox this often (the first at once)
	LoaderEvery time.Duration // the loader runs this often, like cron (one run at a time)
	// ArchiveAfter is the loader's --archive-after: every spool run ends
	// by archiving the batches final for this long (0: never). Seconds,
	// so that batches leave Redis while the others are still paid.
	ArchiveAfter time.Duration

	KillEvery      time.Duration // a random worker is SIGKILLed (and replaced) this often...
	ChaosFor       time.Duration // ...until this much time has passed
	RedisRestartAt time.Duration // Redis is killed -9 and started again at this time (0: never)
	RotateAt       time.Duration // the PSP token is rotated at this time (0: never)

	// PSP sandbox faults.
	Outage     string // FROM:FOR window answering 503 ("" none)
	PAmbiguous float64
	PRefuse    float64
	StatusLag  time.Duration
	Latency    time.Duration
	HangFor    time.Duration
	// ForceHangs makes the sandbox store the first ForceHangs valid
	// creates and then leave them without an answer for HangFor (admin
	// API POST /sandbox/force): creates in flight when a worker dies.
	ForceHangs int

	// Worker timings.
	PSPTimeout      time.Duration
	StatusDelay     time.Duration
	AbsentSpacing   time.Duration
	AbsentChecks    int
	MaxCreates      int
	MaxStatusChecks int

	// The reconciler's sweep in every worker: how often, and how old a
	// payout's last transition must be (at least PSPTimeout + 5s, which
	// the worker enforces too).
	ReconcileInterval time.Duration
	ReconcileGrace    time.Duration

	// RedisReplyDrop is the share of EVAL/EVALSHA replies (ledger
	// transitions and Asynq's scripts) that a redisfault proxy in front of
	// the workers' Redis loses after Redis ran the script (0: the workers
	// talk to Redis directly).
	RedisReplyDrop float64

	// TaskDeleteEvery is how often, until ChaosFor, the suite lists the
	// pending, scheduled and retry tasks of the payout queue through the
	// web UI's API (asynqmon) and deletes or archives up to TaskDeletes of
	// them at random, as a careless operator would (0: never). The
	// reconciler must restore every step so lost.
	TaskDeleteEvery time.Duration
	TaskDeletes     int

	// InterruptLoads is how many loader runs the suite kills (SIGKILL)
	// in the middle of a file, once some of its rows are registered: the
	// batch must pay nothing until a later run completes it.
	InterruptLoads int
	// OrphanEvery is how often, until ChaosFor, the suite removes the
	// lease entries of up to Orphans active tasks, as hibiken/asynq#1051
	// and #1144 leave them: Asynq's recoverer never sees them, the
	// reconciler must (0: never).
	OrphanEvery time.Duration
	Orphans     int

	// ClockOffset runs one worker (the first, and whoever replaces it)
	// run by the payoutclock binary, its task clock this far off
	// (0: none).
	ClockOffset time.Duration

	// H2 makes the token gateway speak HTTP/2 over TLS to the workers
	// (they trust its CA with --psp-ca-file); H2Reset is the probability
	// that the gateway, after the sandbox answered a create 200 (the
	// order is stored), resets the worker's stream instead of answering,
	// with REFUSED_STREAM or PROTOCOL_ERROR: the codes after which Go's
	// HTTP/2 client replays a request it can rewind.
	H2      bool
	H2Reset float64

	// The order lifecycle. With SettleAfter > 0 every order the sandbox
	// stores ends, SettleAfter after its creation, paid or (a seeded share
	// PFail) failed with a reason, and the workers follow each created
	// payout to that outcome (--track-outcome) by status queries every
	// OutcomeIntervals, for at most OutcomeWindow; 0 keeps every order
	// Created and the workers run with --track-outcome=false (created is
	// final).
	SettleAfter      time.Duration
	PFail            float64
	OutcomeIntervals string // comma-separated worker --outcome-intervals
	OutcomeWindow    time.Duration

	// Callbacks makes the sandbox POST every status change (needs
	// SettleAfter) to a forwarder run by the suite, which passes each one
	// on to a live worker's callback listener (--callback-addr); a share
	// PCallbackDup is sent twice and each waits a random 0..CallbackDelay
	// (so they arrive reordered). Every ForgeEvery the suite itself sends
	// a forged callback straight to a live worker: a wrong or missing
	// secret (must be refused 401), an unknown order, or a known order
	// with a status it does not have (both answered 200 and changing
	// nothing: the outcomes must still match the sandbox's truth).
	Callbacks     bool
	PCallbackDup  float64
	CallbackDelay time.Duration
	ForgeEvery    time.Duration

	// Approval makes the loader run with --approval required --by
	// chaos-loader: every batch waits in awaiting_approval, except, when
	// there are several files, the one with the smallest total, which goes
	// at once under --auto-approve-below. The suite approves each waiting
	// batch ApproveAfter after it first saw it (payout approve --by
	// chaos-approver --four-eyes), as a person would mid-run; before
	// approving one of them it cancels Cancels of its payouts (payout
	// cancel --by chaos-ops). Cancelled payouts are final and must have no
	// order at the PSP.
	Approval     bool
	ApproveAfter time.Duration
	Cancels      int

	// Events subscribes a webhook receiver run by the suite to every
	// event (the workers' --notify-url, PAYOUT_NOTIFY_SECRET): it passes
	// each delivery to the independent Standard Webhooks verifier (node,
	// the standardwebhooks npm package; CI=true without it fails), answers
	// a share with 500, a dropped connection or slowly (so the workers
	// retry), and the run ends only when every payout's events 1..n were
	// delivered, the last one its end state (CheckEvents).
	Events bool

	// APISubmit sends the rows of the last file through `payout api`
	// (POST /api/v1/batches, one Idempotency-Key) instead of the spool,
	// behind a proxy that refuses requests and loses answers (FlakyProxy),
	// again with the same key until an answer: the file must end as
	// exactly one batch, its payouts counted like every other.
	APISubmit bool

	// Deadline bounds the wait for every payout to be final.
	Deadline time.Duration

	// Broken runs the workers of internal/proof/cmd/payout-skipcheck: a
	// redelivered create POSTs again. The run must then report duplicates.
	Broken bool
	// BrokenReplay runs the workers of internal/proof/cmd/payout-replay:
	// their HTTP transport may replay a create after a stream reset. The
	// run must then report duplicates.
	BrokenReplay bool

	Seed      int64  // seed of the generated rows, the kill order and the sandbox (0: random)
	WorkDir   string // where the run lives ("": a new temporary directory)
	KeepWork  bool   // keep the work directory even after a passing run
	ModuleDir string // root of the payout module ("": found from the working directory)
}

// DefaultConfig is the full run of `make chaos`: 10,000 rows.
func DefaultConfig() Config {
	return Config{
		Rows: 10000, Files: 10, Workers: 3, Concurrency: 20,
		DropEvery: 4 * time.Second, LoaderEvery: 2 * time.Second, ArchiveAfter: 3 * time.Second,
		KillEvery: 5 * time.Second, ChaosFor: 60 * time.Second,
		RedisRestartAt: 25 * time.Second, RotateAt: 40 * time.Second,
		Outage: "20s:15s", PAmbiguous: 0.25, PRefuse: 0.1,
		StatusLag: 3 * time.Second, Latency: 5 * time.Millisecond, HangFor: 3 * time.Second,
		PSPTimeout: 2 * time.Second, StatusDelay: time.Second, AbsentSpacing: 4 * time.Second,
		AbsentChecks: 2, MaxCreates: 5, MaxStatusChecks: 10,
		ReconcileInterval: 5 * time.Second, ReconcileGrace: 7 * time.Second,
		RedisReplyDrop: 0.01, TaskDeleteEvery: 2 * time.Second, TaskDeletes: 3,
		InterruptLoads: 1, OrphanEvery: 3 * time.Second, Orphans: 3,
		ClockOffset: -5 * time.Minute, H2: true, H2Reset: 0.05,
		SettleAfter: 6 * time.Second, PFail: 0.1, OutcomeIntervals: "1s,2s", OutcomeWindow: 10 * time.Minute,
		Callbacks: true, PCallbackDup: 0.2, CallbackDelay: 2 * time.Second, ForgeEvery: 250 * time.Millisecond,
		Approval: true, ApproveAfter: 3 * time.Second, Cancels: 50,
		Events: true, APISubmit: true,
		Deadline: 13 * time.Minute,
	}
}

// ShortConfig is the run of `make chaos-short` and of the integration test:
// 1,000 rows, every kind of fault, in about three minutes on two cores.
func ShortConfig() Config {
	c := DefaultConfig()
	c.Rows, c.Files = 1000, 4
	c.DropEvery = 3 * time.Second
	c.KillEvery, c.ChaosFor = 3*time.Second, 12*time.Second
	c.RedisRestartAt, c.RotateAt = 7*time.Second, 10*time.Second
	c.Outage = "4s:6s"
	c.TaskDeleteEvery = time.Second
	c.OrphanEvery = 2 * time.Second
	c.SettleAfter, c.OutcomeWindow = 4*time.Second, 4*time.Minute
	c.ForgeEvery = 100 * time.Millisecond
	c.Cancels = 20
	// Tasks whose dequeue reply the Redis proxy lost wait for asynq's
	// lease recovery (a minute or more); following every order to its
	// outcome makes more of them.
	c.Deadline = 6 * time.Minute
	return c
}

// BrokenConfig is a small run tuned to catch the broken worker build: many
// creates stored by the PSP and then left hanging, and workers killed while
// they wait for the answer, so that redelivered creates find their payouts
// in submitting.
func BrokenConfig() Config {
	c := ShortConfig()
	c.Rows, c.Files = 200, 1
	c.KillEvery, c.ChaosFor = 1500*time.Millisecond, 8*time.Second
	c.RedisRestartAt, c.RotateAt, c.Outage = 0, 0, ""
	c.PAmbiguous, c.PRefuse = 0.3, 0
	c.ForceHangs = 60
	c.HangFor, c.PSPTimeout, c.AbsentSpacing = 10*time.Second, 10*time.Second, 10*time.Second
	c.ReconcileGrace = c.PSPTimeout + 5*time.Second
	// Only the fault the broken build is about.
	c.RedisReplyDrop, c.TaskDeleteEvery, c.ClockOffset, c.H2Reset = 0, 0, 0, 0
	c.InterruptLoads, c.OrphanEvery = 0, 0
	noLifecycle(&c)
	c.Broken = true
	// Redelivered creates come back once asynq recovers the tasks of the
	// killed workers (about a minute); the broken build then leaves some
	// payouts in checking for good, so do not wait for them all.
	c.Deadline = 100 * time.Second
	return c
}

// BrokenReplayConfig is a small run tuned to catch the worker built with a
// transport that may replay creates: HTTP/2 with many stream resets after
// the sandbox stored and answered the order, and no other fault.
func BrokenReplayConfig() Config {
	c := ShortConfig()
	c.Rows, c.Files = 200, 1
	c.KillEvery, c.ChaosFor = 0, 0
	c.RedisRestartAt, c.RotateAt, c.Outage = 0, 0, ""
	c.PAmbiguous, c.PRefuse = 0, 0
	c.RedisReplyDrop, c.TaskDeleteEvery, c.ClockOffset = 0, 0, 0
	c.InterruptLoads, c.OrphanEvery = 0, 0
	c.H2, c.H2Reset = true, 0.3
	noLifecycle(&c)
	c.BrokenReplay = true
	c.Deadline = 60 * time.Second
	return c
}

// noLifecycle switches the order lifecycle and the callbacks off: orders
// stay Created and the workers run with --track-outcome=false. The broken
// runs are about duplicate creates only.
func noLifecycle(c *Config) {
	c.Approval, c.ApproveAfter, c.Cancels = false, 0, 0 // about duplicate creates only
	c.Events, c.APISubmit = false, false
	c.SettleAfter, c.PFail = 0, 0
	c.Callbacks, c.PCallbackDup, c.CallbackDelay, c.ForgeEvery = false, 0, 0, 0
}

// Tracking reports whether the workers follow created orders to their
// outcome: whenever the sandbox settles orders.
func (c Config) Tracking() bool { return c.SettleAfter > 0 }

// Validate checks the ranges.
func (c Config) Validate() error {
	var errs []error
	if c.Rows < 1 || c.Files < 1 || c.Files > c.Rows {
		errs = append(errs, errors.New("rows must be >= 1 and files within 1..rows"))
	}
	if c.Workers < 1 || c.Concurrency < 1 {
		errs = append(errs, errors.New("workers and concurrency must be >= 1"))
	}
	if c.DropEvery < 0 || c.LoaderEvery <= 0 || c.ArchiveAfter < 0 || c.KillEvery < 0 || c.ChaosFor < 0 ||
		c.RedisRestartAt < 0 || c.RotateAt < 0 || c.Deadline <= 0 {
		errs = append(errs, errors.New("times must not be negative (loader-every and deadline > 0)"))
	}
	if c.ForceHangs < 0 {
		errs = append(errs, errors.New("force-hangs must not be negative"))
	}
	if c.PAmbiguous < 0 || c.PAmbiguous > 1 || c.PRefuse < 0 || c.PRefuse > 1 {
		errs = append(errs, errors.New("probabilities must be within [0,1]"))
	}
	if _, err := sandbox.ParseWindow(c.Outage); err != nil {
		errs = append(errs, err)
	}
	if c.PSPTimeout <= 0 || c.StatusDelay <= 0 || c.AbsentSpacing < 0 || c.HangFor <= 0 ||
		c.AbsentChecks < 1 || c.MaxCreates < 1 || c.MaxStatusChecks < 1 {
		errs = append(errs, errors.New("worker timings must be > 0 and counts >= 1"))
	}
	if c.ReconcileInterval < 0 || c.ReconcileGrace < 0 || c.TaskDeleteEvery < 0 || c.TaskDeletes < 0 ||
		c.InterruptLoads < 0 || c.OrphanEvery < 0 || c.Orphans < 0 {
		errs = append(errs, errors.New("reconcile times, task-delete-every, task-deletes, interrupt-loads, orphan-every and orphans must not be negative"))
	}
	if c.OrphanEvery > 0 && c.ReconcileInterval == 0 {
		errs = append(errs, errors.New("orphan-every needs the reconciler (reconcile-interval > 0): nothing else restores an orphaned task"))
	}
	if c.ReconcileInterval > 0 && c.ReconcileGrace < c.PSPTimeout+5*time.Second {
		// The worker refuses this too: a create in flight must not look
		// abandoned to the sweep.
		errs = append(errs, errors.New("reconcile-grace must be at least psp-timeout + 5s"))
	}
	if c.TaskDeleteEvery > 0 && c.ReconcileInterval == 0 {
		errs = append(errs, errors.New("tasks deleted through the web UI need the reconciler (reconcile-interval > 0)"))
	}
	if c.RedisReplyDrop < 0 || c.RedisReplyDrop > 0.5 || c.H2Reset < 0 || c.H2Reset > 1 {
		errs = append(errs, errors.New("redis-reply-drop must be within [0,0.5] and h2-reset within [0,1]"))
	}
	if c.H2Reset > 0 && !c.H2 {
		errs = append(errs, errors.New("h2-reset needs h2"))
	}
	if c.Broken && c.BrokenReplay {
		errs = append(errs, errors.New("broken and broken-replay exclude each other"))
	}
	if c.AbsentSpacing < c.PSPTimeout {
		// The worker refuses this too: a timed-out create may still be
		// in progress at the PSP when its absence is counted.
		errs = append(errs, errors.New("absent-spacing must not be shorter than psp-timeout"))
	}
	errs = append(errs, c.outcomeErrors()...)
	return errors.Join(errs...)
}

// outcomeErrors checks the settings of the orders' outcomes, the
// approvals and the callbacks.
func (c Config) outcomeErrors() []error {
	var errs []error
	if c.SettleAfter < 0 || c.OutcomeWindow < 0 || c.CallbackDelay < 0 || c.ForgeEvery < 0 {
		errs = append(errs, errors.New("settle-after, outcome-window, callback-delay and forge-every must not be negative"))
	}
	if c.PFail < 0 || c.PFail > 1 || c.PCallbackDup < 0 || c.PCallbackDup > 1 {
		errs = append(errs, errors.New("p-fail and p-callback-dup must be within [0,1]"))
	}
	if c.Tracking() {
		if c.OutcomeWindow <= 0 || strings.TrimSpace(c.OutcomeIntervals) == "" {
			errs = append(errs, errors.New("settle-after needs outcome-intervals and a positive outcome-window"))
		}
		for _, f := range strings.Split(c.OutcomeIntervals, ",") {
			if d, err := time.ParseDuration(strings.TrimSpace(f)); err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("outcome-intervals %q: %q is not a positive duration", c.OutcomeIntervals, f))
				break
			}
		}
	}
	if c.ApproveAfter < 0 || c.Cancels < 0 {
		errs = append(errs, errors.New("approve-after and cancels must not be negative"))
	}
	if c.Cancels > 0 && !c.Approval {
		errs = append(errs, errors.New("cancels need approval: the payouts are cancelled while their batch waits"))
	}
	if c.Callbacks && !c.Tracking() {
		errs = append(errs, errors.New("callbacks need settle-after: without it no order changes status"))
	}
	if !c.Callbacks && (c.PCallbackDup > 0 || c.CallbackDelay > 0 || c.ForgeEvery > 0) {
		errs = append(errs, errors.New("p-callback-dup, callback-delay and forge-every need callbacks"))
	}
	return errs
}

// EnvPrefix prefixes the environment variable of every flag
// (PAYOUT_CHAOS_ROWS, PAYOUT_CHAOS_KILL_EVERY...).
const EnvPrefix = "PAYOUT_CHAOS_"

// RegisterFlags registers a flag for every knob of c on fs, with c's
// values as defaults.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.Rows, "rows", c.Rows, "payout rows in all")
	fs.IntVar(&c.Files, "files", c.Files, "payout files the rows are split into")
	fs.IntVar(&c.Workers, "workers", c.Workers, "worker processes running at once")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "concurrency of each worker")
	fs.DurationVar(&c.DropEvery, "drop-every", c.DropEvery, "a new file lands in the spool inbox this often")
	fs.DurationVar(&c.LoaderEvery, "loader-every", c.LoaderEvery, "the loader runs this often (like cron)")
	fs.DurationVar(&c.ArchiveAfter, "archive-after", c.ArchiveAfter, "each loader run archives the batches final for this long (0: never)")
	fs.DurationVar(&c.KillEvery, "kill-every", c.KillEvery, "SIGKILL a random worker this often (0: never)")
	fs.DurationVar(&c.ChaosFor, "chaos-for", c.ChaosFor, "kill workers until this long after the start")
	fs.DurationVar(&c.RedisRestartAt, "redis-restart-at", c.RedisRestartAt, "kill -9 and restart Redis at this time (0: never)")
	fs.DurationVar(&c.RotateAt, "rotate-at", c.RotateAt, "rotate the PSP token at this time (0: never)")
	fs.StringVar(&c.Outage, "outage", c.Outage, "sandbox outage window FROM:FOR (empty: none)")
	fs.Float64Var(&c.PAmbiguous, "p-ambiguous", c.PAmbiguous, "sandbox: probability of storing then answering badly")
	fs.Float64Var(&c.PRefuse, "p-refuse", c.PRefuse, "sandbox: probability of a 423 before storing")
	fs.DurationVar(&c.StatusLag, "status-lag", c.StatusLag, "sandbox: new orders answer 404 to status queries this long")
	fs.DurationVar(&c.Latency, "latency", c.Latency, "sandbox: latency of every answer")
	fs.DurationVar(&c.HangFor, "hang-for", c.HangFor, "sandbox: how long a hang lasts")
	fs.IntVar(&c.ForceHangs, "force-hangs", c.ForceHangs, "sandbox: store the first N creates, then leave them hanging")
	fs.DurationVar(&c.PSPTimeout, "psp-timeout", c.PSPTimeout, "worker: timeout of one PSP request")
	fs.DurationVar(&c.StatusDelay, "status-delay", c.StatusDelay, "worker: first status check after an ambiguous answer")
	fs.DurationVar(&c.AbsentSpacing, "absent-spacing", c.AbsentSpacing, "worker: minimum time between two counted 404s")
	fs.IntVar(&c.AbsentChecks, "absent-checks", c.AbsentChecks, "worker: 404s that confirm absence")
	fs.IntVar(&c.MaxCreates, "max-creates", c.MaxCreates, "worker: creates per payout in all")
	fs.IntVar(&c.MaxStatusChecks, "max-status-checks", c.MaxStatusChecks, "worker: status checks without an answer before needs_review")
	fs.DurationVar(&c.ReconcileInterval, "reconcile-interval", c.ReconcileInterval, "worker: how often the reconciler sweeps (0: never)")
	fs.DurationVar(&c.ReconcileGrace, "reconcile-grace", c.ReconcileGrace, "worker: the reconciler leaves alone a payout changed more recently (>= psp-timeout + 5s)")
	fs.Float64Var(&c.RedisReplyDrop, "redis-reply-drop", c.RedisReplyDrop, "share of the workers' EVAL/EVALSHA replies a proxy loses after Redis ran them (0: no proxy)")
	fs.DurationVar(&c.TaskDeleteEvery, "task-delete-every", c.TaskDeleteEvery, "delete or archive random tasks through the web UI this often, until chaos-for (0: never)")
	fs.IntVar(&c.TaskDeletes, "task-deletes", c.TaskDeletes, "tasks deleted or archived each time at most")
	fs.IntVar(&c.InterruptLoads, "interrupt-loads", c.InterruptLoads, "loader runs killed -9 in the middle of a file (the next run must complete it)")
	fs.DurationVar(&c.OrphanEvery, "orphan-every", c.OrphanEvery, "remove the lease entries of active tasks this often, until chaos-for, as hibiken/asynq#1051 does (0: never)")
	fs.IntVar(&c.Orphans, "orphans", c.Orphans, "active tasks orphaned each time at most")
	fs.DurationVar(&c.ClockOffset, "clock-offset", c.ClockOffset, "one worker (the payoutclock binary) schedules its tasks with its clock this far off (0: none)")
	fs.BoolVar(&c.H2, "h2", c.H2, "the token gateway speaks HTTP/2 over TLS to the workers")
	fs.Float64Var(&c.H2Reset, "h2-reset", c.H2Reset, "gateway: probability of resetting the stream of a create the sandbox stored and answered 200")
	fs.DurationVar(&c.SettleAfter, "settle-after", c.SettleAfter, "sandbox: an order ends paid or failed this long after its creation; the workers follow it (0: orders stay Created, --track-outcome=false)")
	fs.Float64Var(&c.PFail, "p-fail", c.PFail, "sandbox: share of orders that end failed, with a reason")
	fs.StringVar(&c.OutcomeIntervals, "outcome-intervals", c.OutcomeIntervals, "worker: waits between the outcome status queries of a created order")
	fs.DurationVar(&c.OutcomeWindow, "outcome-window", c.OutcomeWindow, "worker: a created payout without an outcome after this long needs review (a healthy run never reaches it)")
	fs.BoolVar(&c.Callbacks, "callbacks", c.Callbacks, "sandbox callbacks through a forwarder to the workers' listeners, and forged callbacks from the suite (needs settle-after)")
	fs.Float64Var(&c.PCallbackDup, "p-callback-dup", c.PCallbackDup, "sandbox: probability of sending a callback twice")
	fs.DurationVar(&c.CallbackDelay, "callback-delay", c.CallbackDelay, "sandbox: delay each callback by a random 0..this (reordered)")
	fs.DurationVar(&c.ForgeEvery, "forge-every", c.ForgeEvery, "the suite sends a forged callback (wrong secret, unknown order, false status) to a live worker this often (0: never)")
	fs.BoolVar(&c.Approval, "approval", c.Approval, "load with --approval required (one file under --auto-approve-below) and approve each waiting batch mid-run")
	fs.DurationVar(&c.ApproveAfter, "approve-after", c.ApproveAfter, "approve a batch this long after it was first seen awaiting approval")
	fs.IntVar(&c.Cancels, "cancels", c.Cancels, "payouts of one waiting batch cancelled before it is approved (needs approval)")
	fs.BoolVar(&c.Events, "events", c.Events, "a webhook receiver subscribed to every event, verifying each delivery with the node Standard Webhooks verifier and answering some with 500, a dropped connection or slowly; every payout's events must arrive")
	fs.BoolVar(&c.APISubmit, "api-submit", c.APISubmit, "the last file goes through payout api (one Idempotency-Key, retried) behind a proxy that refuses requests and loses answers; it must make exactly one batch")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "fail when payouts are still open this long after the start")
	fs.BoolVar(&c.Broken, "broken", c.Broken, "build the deliberately unsafe worker (POSTs again on redelivery); the run then passes only if duplicates are detected")
	fs.BoolVar(&c.BrokenReplay, "broken-replay", c.BrokenReplay, "build the deliberately unsafe worker whose transport may replay creates; the run then passes only if duplicates are detected")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "seed of rows, kills and sandbox (0: random)")
	fs.StringVar(&c.WorkDir, "work-dir", c.WorkDir, "work directory (empty: a new temporary one)")
	fs.BoolVar(&c.KeepWork, "keep", c.KeepWork, "keep the work directory after a passing run")
	fs.StringVar(&c.ModuleDir, "module-dir", c.ModuleDir, "root of the payout module (empty: found from the working directory)")
}

// ApplyEnv sets every flag of fs not given on the command line from the
// environment variable EnvPrefix+NAME (upper case, dashes as underscores).
func ApplyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	return flagenv.Apply(fs, EnvName, lookup)
}

// EnvName is the environment variable of a flag.
func EnvName(flagName string) string {
	return flagenv.Name(EnvPrefix, flagName)
}
