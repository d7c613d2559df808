package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/redisconn"
	"github.com/acme/payout/internal/schedule"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// redisFlags say how to reach Redis.
type redisFlags struct {
	url      string
	caFile   string
	insecure bool
	fs       *flag.FlagSet
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	r.fs = fs
	fs.StringVar(&r.url, "redis", "redis://127.0.0.1:6379/0",
		"Redis URL: redis://[user:pass@]host:port/db, rediss://... (TLS), redis-sentinel://host:port,.../master, redis-cluster://host:port,...")
	fs.StringVar(&r.caFile, "redis-ca-file", "", "PEM CA certificates to trust for rediss:// instead of the system roots")
	fs.BoolVar(&r.insecure, "redis-insecure-skip-verify", false, "do not verify the Redis TLS certificate (tests only)")
}

// open connects to Redis, first naming it on stderr (host, port and
// database; sentinel or cluster addresses; never a user or password): a
// command pointed at another Redis than meant says so before it acts.
func (r *redisFlags) open(ctx context.Context, e *env) (redis.UniversalClient, error) {
	opts := redisconn.Options{URL: r.url, CAFile: r.caFile, InsecureSkipVerify: r.insecure}
	if d := redisconn.Describe(opts); d != "" {
		if !r.given() {
			d += " (the default: neither --redis nor " + envName(r.fs.Name(), "redis") + " given)"
		}
		fmt.Fprintf(e.stderr, "%s: Redis %s\n", strings.TrimSpace("payout "+e.cmd), d)
	}
	c, err := redisconn.Open(ctx, opts)
	if err != nil {
		if errors.Is(err, redisconn.ErrBadURL) || errors.Is(err, redisconn.ErrBadConfig) || errors.Is(err, redisconn.ErrAuth) {
			return nil, configErr(err)
		}
		return nil, infraErr(err)
	}
	return c, nil
}

// given reports whether --redis was given, on the command line or in the
// environment (flagenv sets a flag from its variable, so it is visited).
func (r *redisFlags) given() bool {
	if r.fs == nil {
		return true
	}
	set := false
	r.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "redis" })
	return set
}

// logAndOpen makes the logger of lf, then connects to the Redis of rf: the
// front of the commands that log and touch Redis. The caller closes the
// client.
func logAndOpen(ctx context.Context, e *env, lf *logFlags, rf *redisFlags) (zerolog.Logger, redis.UniversalClient, error) {
	log, err := lf.logger(e)
	if err != nil {
		return log, nil, err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return log, nil, err
	}
	return log, rdb, nil
}

// keyFlags say where the data key that encrypts card numbers comes from.
type keyFlags struct {
	keyFile   string
	plaintext bool
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.keyFile, "data-key-file", "", "file holding the base64 data key that encrypts card numbers in Redis (or the key itself in PAYOUT_DATA_KEY; old keys in PAYOUT_DATA_KEYS_OLD)")
	fs.BoolVar(&k.plaintext, "insecure-plaintext", false, "store card numbers in Redis unencrypted when no data key is given (never in production)")
}

func (k *keyFlags) keyring(e *env) (*vault.Keyring, error) {
	ring, err := vault.LoadKeyring(e.getenv("PAYOUT_DATA_KEY"), k.keyFile, e.getenv("PAYOUT_DATA_KEYS_OLD"))
	switch {
	case err == nil:
		if k.plaintext {
			ring = ring.AllowPlaintext()
		}
		return ring, nil
	case errors.Is(err, vault.ErrNoKey) && k.plaintext:
		return vault.Plaintext(), nil
	case errors.Is(err, vault.ErrNoKey):
		return nil, usageErr("no data key: set PAYOUT_DATA_KEY or --data-key-file (make one with `payout keygen`), or pass --insecure-plaintext")
	}
	return nil, configErr(err)
}

// fileFlags are the validation rules of payout files.
type fileFlags struct {
	scale        int
	maxAmount    string
	maxIDLen     int
	amountFormat string
	operators    string
	banks        string
	sheet        string
	hiddenRows   bool
	cardPrefixes string
}

func (f *fileFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.scale, "decimals", money.DefaultScale, "decimal places an amount may have")
	fs.StringVar(&f.maxAmount, "max-amount", "", "refuse rows with an amount above this (empty: 1000000000, less with 7 or 8 --decimals); at most the ceiling of --decimals, 900719925474.09 with 2, which also bounds a file's total")
	fs.IntVar(&f.maxIDLen, "max-external-id-len", payfile.DefaultMaxExternalIDLen, "longest externalId accepted")
	fs.StringVar(&f.amountFormat, "amount-format", money.Plain.String(), "how the file writes amounts: plain (1500.50), comma (1500,50 or 1 500,50: space or no-break space groups thousands), comma-dot (1.500,50) or dot-comma (1,500.50); declared, never guessed")
	fs.StringVar(&f.operators, "telecom-operators", "", "file of the PSP's telecom operator names, one a line: refuse a telecomOperator not in it, exactly (with a \"did you mean\"); empty: not checked, with a warning per file")
	fs.StringVar(&f.sheet, "sheet", "", "the sheet read from an .xlsx workbook (default: the first one not hidden)")
	fs.BoolVar(&f.hiddenRows, "include-hidden-rows", false, "read a workbook's hidden rows, rows filtered out by an autofilter, hidden columns and hidden sheet as if shown (default: refused, since they would be paid unseen)")
	fs.StringVar(&f.cardPrefixes, "card-prefixes", payfile.CardPrefixesIIN.String(), "which 12-19 digit Luhn-valid runs outside cardNumber (in externalId, telecomOperator, phoneNumber, notes...) refuse their row as a card number: schemes (those beginning like a card scheme's numbers: Visa, Mastercard, Mir...; about 4% of random digit runs) or any (about 10%)")
	fs.StringVar(&f.banks, "bank-names", "", "file of the PSP's bank names, one a line: allow a bankName column and refuse a name not in it, exactly")
}

func (f *fileFlags) options() (payfile.Options, error) {
	o := payfile.Options{Scale: f.scale, MaxExternalIDLen: f.maxIDLen, Sheet: f.sheet, IncludeHiddenRows: f.hiddenRows}
	af, err := money.ParseFormat(f.amountFormat)
	if err != nil {
		return o, usageErr("--amount-format: %v", err)
	}
	o.AmountFormat = af
	if o.CardPrefixes, err = payfile.ParseCardPrefixes(f.cardPrefixes); err != nil {
		return o, usageErr("--card-prefixes: %v", err)
	}
	if f.operators != "" {
		if o.TelecomOperators, err = payfile.ReadDictionary(f.operators); err != nil {
			return o, usageErr("--telecom-operators: %v", err)
		}
	}
	if f.banks != "" {
		if o.BankNames, err = payfile.ReadDictionary(f.banks); err != nil {
			return o, usageErr("--bank-names: %v", err)
		}
	}
	if f.scale < 0 || f.scale > 8 {
		return o, usageErr("--decimals %d: want 0 to 8", f.scale)
	}
	if f.scale == 0 {
		o.Scale = -1 // payfile: whole units only
	}
	if f.maxAmount != "" {
		a, err := money.Parse(f.maxAmount, 8)
		if err != nil {
			return o, usageErr("--max-amount: %v", err)
		}
		if c := money.Ceiling(f.scale); a.Cmp(c) > 0 {
			return o, usageErr("--max-amount %s: above %s, the largest amount the ledger counts exactly with --decimals %d", f.maxAmount, c.StringFixed(f.scale), f.scale)
		}
		o.MaxAmount = a
	}
	return o, nil
}

// pipelineFlag turns on go-redis autopipelining for the hot Redis calls of
// load, worker and run: the loader's enqueues and the worker's ledger
// transitions. Concurrent callers then share round trips; each command is
// still sent on its own, and every one of them is safe to run twice (an
// enqueue carries its task ID, a ledger transition is compare-and-set), so
// a pipeline replayed after a dropped connection changes nothing.
type pipelineFlag struct{ on bool }

func (f *pipelineFlag) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "redis-pipeline", true, "batch concurrent enqueues and ledger transitions into Redis pipelines (go-redis autopipelining); false: one round trip each")
}

// conn returns the connection of the hot calls: rdb itself, or an
// autopipeliner over it that lives as long as rdb.
func (f *pipelineFlag) conn(rdb redis.UniversalClient) (redis.UniversalClient, error) {
	if !f.on {
		return rdb, nil
	}
	ap, err := rdb.AutoPipeline()
	if err != nil {
		return nil, fmt.Errorf("redis autopipelining: %w", err)
	}
	return ap, nil
}

// enqueueFlags say how the loader submits create tasks.
type enqueueFlags struct {
	concurrency int
	pipelineFlag
}

func (f *enqueueFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.concurrency, "enqueue-concurrency", loader.DefaultEnqueueWorkers, "create tasks submitted to Redis at once")
	f.pipelineFlag.register(fs)
}

// queue returns the queue of the loader's enqueues.
func (f *enqueueFlags) queue(rdb redis.UniversalClient) (*queue.Queue, error) {
	if f.concurrency < 1 {
		return nil, usageErr("--enqueue-concurrency %d: want at least 1", f.concurrency)
	}
	conn, err := f.conn(rdb)
	if err != nil {
		return nil, err
	}
	return queue.New(conn), nil
}

// pspFlags say how to reach the PSP.
type pspFlags struct {
	url            string
	tokenFile      string
	timeout        time.Duration
	amountAsNumber bool
	statusByExtID  bool
	plainHTTP      bool
}

func (p *pspFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.url, "psp-url", "", "base URL of the PSP, e.g. https://psp.example.com")
	fs.StringVar(&p.tokenFile, "psp-token-file", "", "file holding the PSP bearer token, re-read when it changes (or the token in PAYOUT_PSP_TOKEN)")
	fs.DurationVar(&p.timeout, "psp-timeout", 30*time.Second, "timeout of one PSP request")
	fs.BoolVar(&p.amountAsNumber, "psp-amount-as-number", false, "send amounts as JSON numbers instead of decimal strings (digits exact either way)")
	fs.BoolVar(&p.statusByExtID, "status-by-external-id", false, "query order status by externalId even when the PSP order id is known")
	fs.BoolVar(&p.plainHTTP, "allow-plain-http", false, "accept an http:// --psp-url to a host that is not loopback (the token and card numbers then cross the network in clear)")
}

// checkURL adds to probs what is wrong with --psp-url (given): not an
// absolute http(s) URL with a host, or plain http to a host that is not
// loopback (localhost, 127.0.0.0/8, ::1) without --allow-plain-http.
func (p *pspFlags) checkURL(probs *problems) {
	u, err := url.Parse(p.url)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		probs.flag("psp-url", "--psp-url %q: want an absolute https:// URL, such as https://psp.example.com", p.url)
	case u.Scheme == "http" && !p.plainHTTP && !isLoopback(u.Hostname()):
		probs.flag("psp-url", "--psp-url %s: plain http to %s would send the PSP token and card numbers in clear: use https://, or --allow-plain-http (PAYOUT_ALLOW_PLAIN_HTTP) if the network in between is trusted", p.url, u.Hostname())
	}
}

// isLoopback tells whether host (a URL's, without port or brackets) names
// this machine: localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func (p *pspFlags) tokenSource(e *env) (psp.TokenSource, error) {
	tok := e.getenv("PAYOUT_PSP_TOKEN")
	switch {
	case tok != "" && p.tokenFile != "":
		return nil, usageErr("give the PSP token either in PAYOUT_PSP_TOKEN or with --psp-token-file, not both")
	case p.tokenFile != "":
		ts := psp.TokenFile(p.tokenFile)
		if _, err := ts.Token(); err != nil {
			return nil, configErr(err)
		}
		return ts, nil
	case tok != "":
		return psp.StaticToken(tok), nil
	}
	return nil, usageErr("no PSP token: set PAYOUT_PSP_TOKEN or --psp-token-file")
}

// workerFlags tune the handlers.
type workerFlags struct {
	concurrency     int
	lanes           int
	rate            int
	statusDelay     time.Duration
	absentChecks    int
	absentSpacing   time.Duration
	maxCreates      int
	maxStatusChecks int
	maxRetries      int
	trustExtLookup  bool
	reconcileEvery  time.Duration
	reconcileGrace  time.Duration
	releaseEvery    time.Duration
	leaseGrace      time.Duration
	trackOutcome    bool
	outcomeWindow   time.Duration
	outcomeEvery    string
	paidStatuses    string
	failedStatuses  string
	// the watch of paid payouts (watch.go)
	returnedStatuses string
	watchWindow      time.Duration
	watchEvery       string
}

func (w *workerFlags) register(fs *flag.FlagSet) {
	d := worker.DefaultConfig()
	fs.IntVar(&w.concurrency, "concurrency", d.Concurrency, "payouts processed at once by this process")
	fs.IntVar(&w.lanes, "dequeue-lanes", d.Lanes, "Asynq servers this process runs on the payout queue, sharing --concurrency: each takes tasks off the queue one round trip to Redis at a time (at most --concurrency of them)")
	fs.IntVar(&w.rate, "rate", 0, "PSP requests per second, shared by all workers on the same Redis (0: no limit)")
	fs.DurationVar(&w.statusDelay, "status-delay", d.StatusDelay, "first status check after an ambiguous create answer")
	fs.IntVar(&w.absentChecks, "absent-checks", d.Policy.AbsentChecks, "consecutive 404 status answers that confirm an order is absent (K)")
	fs.DurationVar(&w.absentSpacing, "absent-spacing", d.Policy.AbsentSpacing, "minimum time between two counted 404 answers (D)")
	fs.IntVar(&w.maxCreates, "max-creates", d.Policy.MaxCreates, "create requests per payout in all, after confirmed absences (M)")
	fs.IntVar(&w.maxStatusChecks, "max-status-checks", d.Policy.MaxFaults, "status checks without an answer before a payout needs review (N)")
	fs.IntVar(&w.maxRetries, "max-create-retries", d.MaxCreateRetries, "creates of a payout that provably did not reach the PSP (dial errors, 429) before it needs review")
	fs.DurationVar(&w.reconcileEvery, "reconcile-interval", reconcile.DefaultInterval, "how often one worker sweeps for open payouts whose task was lost (deleted, archived, or dropped after a lost Redis reply) and restores it; 0: this process never sweeps")
	fs.DurationVar(&w.reconcileGrace, "reconcile-grace", reconcile.DefaultGrace, "a payout changed more recently than this is left to the worker acting on it")
	fs.DurationVar(&w.releaseEvery, "release-interval", schedule.DefaultInterval, "how often one worker releases the scheduled payouts whose release time has come (moves them to queued, enqueues their creates); 0: this process never releases")
	fs.DurationVar(&w.leaseGrace, "reconcile-lease-grace", queue.DefaultLeaseGrace, leaseGraceUsage)
	fs.BoolVar(&w.trackOutcome, "track-outcome", true, "follow every created order to paid or failed by status queries (false: created is final, for a PSP that reports nothing after creation)")
	fs.DurationVar(&w.outcomeWindow, "outcome-window", d.Outcome.Window, "a created payout without a final status after this long needs review")
	fs.StringVar(&w.outcomeEvery, "outcome-intervals", joinDurations(d.Outcome.Intervals), "waits between the outcome status queries of a created order, comma-separated; the last repeats")
	fs.StringVar(&w.paidStatuses, "psp-paid-statuses", strings.Join(psp.DefaultPaidStatuses, ","), "PSP status words that mean the money was sent (comma-separated, any case; an assumption: the reference shows only Created)")
	fs.StringVar(&w.failedStatuses, "psp-failed-statuses", strings.Join(psp.DefaultFailedStatuses, ","), "PSP status words that mean the order will not be paid (comma-separated, any case); any other word is still pending")
	w.registerWatch(fs, d)
	fs.BoolVar(&w.trustExtLookup, "trust-status-by-external-id", false, "count a 404 to a status query by externalId as a miss at once, without first seeing the PSP find a known order by its externalId")
}

// config builds the worker's tuning from the flags, adding every problem
// to probs: the CLI's own rules first, then worker.Config's, named by flag.
func (w *workerFlags) config(p *pspFlags, probs *problems) worker.Config {
	for _, f := range []struct {
		name string
		v    int
	}{{"concurrency", w.concurrency}, {"dequeue-lanes", w.lanes}, {"max-creates", w.maxCreates}, {"max-status-checks", w.maxStatusChecks}, {"max-create-retries", w.maxRetries}} {
		if f.v < 1 {
			probs.flag(f.name, "--%s %d: must be at least 1", f.name, f.v)
		}
	}
	// A request that timed out may still be processed by the PSP after we
	// gave up: absence is only believable from two 404s spaced at least a
	// PSP timeout apart.
	if w.absentChecks < 2 {
		probs.flag("absent-checks", "--absent-checks %d: at least 2 404 answers must confirm an absence", w.absentChecks)
	}
	if w.absentSpacing < p.timeout {
		probs.flag("absent-spacing", "--absent-spacing %s is shorter than --psp-timeout %s: a timed-out create may still be in progress at the PSP", w.absentSpacing, p.timeout)
	}
	c := worker.DefaultConfig()
	c.Concurrency = w.concurrency
	c.Lanes = w.lanes
	c.Rate = w.rate
	c.StatusDelay = w.statusDelay
	c.Policy = decide.CheckPolicy{AbsentChecks: w.absentChecks, AbsentSpacing: w.absentSpacing, MaxCreates: w.maxCreates, MaxFaults: w.maxStatusChecks}
	c.MaxCreateRetries = w.maxRetries
	c.TrustStatusByExternal = w.trustExtLookup
	c.ShutdownTimeout = p.timeout + 5*time.Second
	w.outcome(&c, probs)
	c.Reconcile = reconcile.Config{Interval: w.reconcileEvery, Grace: w.reconcileGrace, LeaseGrace: w.leaseGrace}
	c.ReconcileOff = w.reconcileEvery == 0
	c.Release = schedule.Config{Interval: w.releaseEvery}
	c.ReleaseOff = w.releaseEvery <= 0
	// A create in flight must never look abandoned to the sweep.
	if !c.ReconcileOff && w.reconcileEvery > 0 && w.reconcileGrace >= 0 && w.reconcileGrace < c.ShutdownTimeout {
		probs.flag("reconcile-grace", "--reconcile-grace %s must be at least --psp-timeout + 5s (%s): a create still in flight must not look abandoned", w.reconcileGrace, c.ShutdownTimeout)
	}
	probs.worker(c.ValidateSettings())
	return c
}

// outcome sets how created orders are followed to paid or failed.
func (w *workerFlags) outcome(c *worker.Config, probs *problems) {
	words, err := psp.NewStatusWords(splitList(w.paidStatuses), splitList(w.failedStatuses))
	if err != nil {
		probs.flag("psp-paid-statuses", "--psp-paid-statuses/--psp-failed-statuses: %v", err)
	}
	var every []time.Duration
	for _, f := range splitList(w.outcomeEvery) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			probs.flag("outcome-intervals", "--outcome-intervals %q: %q is not a positive duration", w.outcomeEvery, f)
			continue
		}
		every = append(every, d)
	}
	if len(every) == 0 && !probs.has("outcome-intervals") {
		probs.flag("outcome-intervals", "--outcome-intervals needs at least one duration")
	}
	if w.outcomeWindow <= 0 {
		probs.flag("outcome-window", "--outcome-window %s: must be positive", w.outcomeWindow)
	}
	c.Outcome = worker.OutcomePolicy{Track: w.trackOutcome, Window: w.outcomeWindow, Intervals: every, Words: words}
	w.watch(c, probs)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func joinDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
