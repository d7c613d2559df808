// Package cli implements the payout command: its subcommands, their flags
// (each with a PAYOUT_* environment variable), logging setup and the exit
// codes of docs/design.md.
//
// The embedded Redis (miniredis) of payout run --sandbox and payout dev is a
// product feature for the demo, as the PSP simulator (package sandbox) is:
// both ship in the payout binary so that a person tries payout without a
// Redis server or a PSP account. Neither holds anything past the process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acme/payout/internal/flagenv"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/worker"

	"github.com/acme/payout/internal/queue"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Exit codes of every command.
const (
	ExitOK       = 0 // all good
	ExitRejected = 1 // some rows or files refused, or payouts needing review
	ExitUsage    = 2 // usage or configuration error
	ExitInfra    = 3 // infrastructure unreachable (Redis, PSP)
)

// exitError carries an exit code through an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, a...)}
}

func infraErr(err error) error { return &exitError{ExitInfra, err} }

func configErr(err error) error { return &exitError{ExitUsage, err} }

// errRejected makes the command exit 1 after it printed what was refused.
var errRejected = &exitError{ExitRejected, errors.New("some rows or files were refused or need review")}

// env is the process environment, replaceable in tests.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	stdin          io.Reader
	// environ is every variable (KEY=VALUE), for the warning about unknown
	// PAYOUT_* ones; nil: not checked.
	environ []string
	cmd     string // the command's name, for messages
	// capture, if set, sees every FlagSet the command builds.
	capture func(*flag.FlagSet)
	// unsafe is zero except in a broken binary of the harness (MainUnsafe).
	unsafe Unsafe
	// hooks are zero except in a harness binary (MainWith).
	hooks Hooks
}

// Hooks are what test code injects into a run of the command line
// (MainWith); the payout binary sets none.
type Hooks struct {
	// Queue configures the queue a worker enqueues in: the chaos suite
	// runs one worker whose task clock is off (queue.WithClock).
	Queue []queue.Option
	// Account is the operating-system account the commands run as
	// (who acts, actor): a table test runs a command as the person the
	// console signs in. Nil: the process's own (os/user).
	Account func() (uid, name string)
	// Done sees the error a command ended with (nil: success), before it
	// is turned into an exit code: a test classifies it (errors.Is).
	Done func(command string, err error)
}

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"load", "validate payout files and enqueue their rows (FILE... or --spool DIR)", runLoad},
		{"worker", "process payout tasks against the PSP", runWorker},
		{"run", "load, process, wait and report one file in one process", runRun},
		{"report", "write the result file of a batch (BATCH or FILE)", runReport},
		{"status", "show the progress of batches", runStatus},
		{"ui", "serve the Asynq web UI and the batches page", runUI},
		{"api", "serve the HTTP API /api/v1 for the systems that pay (docs/api.md)", runAPI},
		{"token", "create, list or revoke the API's tokens (create NAME --role ROLE, list, revoke NAME)", runToken},
		{"approve", "let a batch that awaits approval go to the workers", runApprove},
		{"discard", "refuse a batch that awaits approval: every payout cancelled", runDiscard},
		{"cancel", "cancel payouts not sent yet (BATCH [EXTERNALID...])", runCancel},
		{"release", "let payouts held over their recipient's velocity limit go (BATCH EXTERNALID...)", runRelease},
		{"history", "print the audit trail of a batch or payout (or of the queue)", runHistory},
		{"archive", "move final batches older than --older-than out of Redis into archive files", runArchive},
		{"reconcile", "restore the lost tasks of open payouts once (workers do it periodically)", runReconcile},
		{"resolve", "decide about a payout that needs review (recheck, created, rejected)", runResolve},
		{"pause", "pause the payout queue (no request goes to the PSP)", runPause},
		{"resume", "resume the payout queue", runResume},
		{"redeliver", "send webhook events of an endpoint again (one, or the failed ones since a time)", runRedeliver},
		{"sandbox", "run the PSP simulator", runSandbox},
		{"dev", "a local stack: embedded Redis, PSP simulator, worker and console, until Ctrl-C", runDev},
		{"keygen", "print a new data key for PAYOUT_DATA_KEY", runKeygen},
		{"passwd", "print a users-file line NAME:HASH for payout ui --users (bcrypt)", runPasswd},
	}
}

// Main runs the payout command line and returns the exit code; getenv
// reads the environment. Unknown PAYOUT_* variables are not looked for
// (MainEnviron does).
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return dispatch(ctx, args, &env{stdout: stdout, stderr: stderr, getenv: getenv, stdin: stdin})
}

// Unsafe is the deliberately broken behaviours a binary of the harness
// (internal/proof/cmd/payout-skipcheck, internal/proof/cmd/payout-replay)
// gives the workers of payout worker and payout run, for the proof of
// safety to show that it detects the duplicates they make. cmd/payout
// calls MainEnviron, which has none; no flag or environment variable sets
// one.
type Unsafe struct {
	Worker worker.Unsafe
	PSP    psp.Unsafe
}

// MainUnsafe is MainEnviron for a deliberately broken binary of the
// harness: the workers it starts have the behaviours of u. Never ship.
func MainUnsafe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string, u Unsafe) int {
	e := environEnv(stdin, stdout, stderr, environ)
	e.unsafe = u
	return dispatch(ctx, args, e)
}

// MainEnviron is Main with the whole environment (os.Environ()): it also
// warns about every PAYOUT_* variable that no flag or secret reads.
func MainEnviron(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	return dispatch(ctx, args, environEnv(stdin, stdout, stderr, environ))
}

// MainWith is MainEnviron with hooks, for a harness binary built from test
// code (internal/proof/chaos/payoutclock).
func MainWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string, h Hooks) int {
	e := environEnv(stdin, stdout, stderr, environ)
	e.hooks = h
	return dispatch(ctx, args, e)
}

// environEnv is the env of a process with the whole environment environ.
func environEnv(stdin io.Reader, stdout, stderr io.Writer, environ []string) *env {
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	getenv := func(k string) string { return vars[k] }
	return &env{stdout: stdout, stderr: stderr, getenv: getenv, stdin: stdin, environ: environ}
}

func dispatch(ctx context.Context, args []string, e *env) int {
	stderr := e.stderr
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			e.cmd = c.name
			err := c.run(ctx, e, args[1:])
			if e.hooks.Done != nil {
				e.hooks.Done(c.name, err)
			}
			return exitCode(stderr, c.name, err)
		}
	}
	fmt.Fprintf(stderr, "payout: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return ExitUsage
}

func exitCode(stderr io.Writer, name string, err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee != errRejected {
			for _, e := range problemLines(ee.err) {
				fmt.Fprintf(stderr, "payout %s: %v\n", name, e)
			}
		}
		return ee.code
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "payout %s: interrupted\n", name)
		return ExitInfra
	}
	fmt.Fprintf(stderr, "payout %s: %v\n", name, err)
	return ExitInfra
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: payout COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set by the environment variable PAYOUT_<FLAG> (upper case, - as _);")
	fmt.Fprintln(w, "those of payout sandbox by PAYOUT_SANDBOX_<FLAG>.")
	fmt.Fprintln(w, "Run 'payout COMMAND -h' for the flags of a command.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 rows/files refused or needing review, 2 usage/configuration, 3 infrastructure unreachable.")
}

// flagSetHook lets a test see every FlagSet a command builds.
var flagSetHook func(*flag.FlagSet)

// newFlags returns a FlagSet whose usage lists each flag with its
// environment variable.
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if flagSetHook != nil {
		flagSetHook(fs)
	}
	if e.capture != nil {
		e.capture(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: payout %s %s\n\nflags (environment variable in brackets):\n", name, synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(e.stderr, "  --%s [%s]\n      %s%s\n", f.Name, envName(fs.Name(), f.Name), f.Usage, def)
		})
	}
	return fs
}

// Environment variable prefixes: PAYOUT_<FLAG> for every command but the
// simulator's, whose flags (payout sandbox, and the psp-sandbox binary,
// which is the same command) are PAYOUT_SANDBOX_<FLAG>.
const (
	envPrefix        = "PAYOUT_"
	sandboxEnvPrefix = "PAYOUT_SANDBOX_"
)

// deprecatedEnv are the variables some flags had before every variable
// followed the rule: still read, with a warning naming the new one. Keys
// are a flag name, or "command/flag" for one command only.
var deprecatedEnv = map[string]string{
	"redis":    "PAYOUT_REDIS_URL",
	"ui/addr":  "PAYOUT_UI_ADDR",
	"ui/users": "PAYOUT_UI_USERS_FILE",
	"by":       "PAYOUT_OPERATOR",
	// payout token's roles file was --roles before it was --roles-file
	// like every other command's.
	"token/roles-file": "PAYOUT_ROLES",
}

// envName is the variable of a flag: PAYOUT_<FLAG>, PAYOUT_SANDBOX_<FLAG>
// for payout sandbox. No exception.
func envName(command, flagName string) string {
	if command == "sandbox" {
		return flagenv.Name(sandboxEnvPrefix, flagName)
	}
	return flagenv.Name(envPrefix, flagName)
}

// oldEnvName is the deprecated variable of a flag, "" when it has none.
func oldEnvName(command, flagName string) string {
	if v, ok := deprecatedEnv[command+"/"+flagName]; ok {
		return v
	}
	if command == "sandbox" {
		return ""
	}
	return deprecatedEnv[flagName]
}

// secretEnv are the variables read outside the flags: secrets, which a
// flag would show in the process list.
var secretEnv = []string{
	"PAYOUT_PSP_TOKEN", "PAYOUT_DATA_KEY", "PAYOUT_DATA_KEYS_OLD", "PAYOUT_CALLBACK_SECRET",
	"PAYOUT_UI_USER", "PAYOUT_UI_PASSWORD", "PAYOUT_UI_TOKEN", notify.SecretEnv,
}

// internalEnvPrefixes are variables of the test and chaos harnesses.
var internalEnvPrefixes = []string{"PAYOUT_TEST_", "PAYOUT_CHAOS_"}

// knownEnv returns every variable payout reads: those of every flag of
// every command (found by building each command's flags), their
// deprecated names, and the secrets. new holds the current names only.
func knownEnv(ctx context.Context) (all, current map[string]bool) {
	all, current = map[string]bool{}, map[string]bool{}
	for _, v := range secretEnv {
		all[v], current[v] = true, true
	}
	var sets []*flag.FlagSet
	probe := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	probe.capture = func(fs *flag.FlagSet) { sets = append(sets, fs) }
	for _, c := range commands() {
		_ = c.run(ctx, probe, []string{"-h"})
	}
	for _, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			n := envName(fs.Name(), f.Name)
			all[n], current[n] = true, true
			if old := oldEnvName(fs.Name(), f.Name); old != "" {
				all[old] = true
			}
		})
	}
	return all, current
}

// warnUnknownEnv warns about each PAYOUT_* variable of e.environ that
// payout does not read, naming the closest known one; never a value.
func warnUnknownEnv(ctx context.Context, e *env) {
	if e.environ == nil {
		return
	}
	all, current := knownEnv(ctx)
	for _, s := range flagenv.Unknown(e.environ, envPrefix, all, internalEnvPrefixes...) {
		if s.Closest == "" {
			fmt.Fprintf(e.stderr, "payout %s: warning: %s is not a payout variable: ignored\n", e.cmd, s.Name)
			continue
		}
		closest := flagenv.Unknown([]string{s.Name}, envPrefix, current)
		if len(closest) == 1 && closest[0].Closest != "" {
			s.Closest = closest[0].Closest
		}
		fmt.Fprintf(e.stderr, "payout %s: warning: %s is not a payout variable: ignored; did you mean %s?\n", e.cmd, s.Name, s.Closest)
	}
}

// parseQuiet is fs.Parse without the flag package's own output: a wrong
// flag gets one line naming it, with the closest flag ("did you mean") and
// where the list is, not the whole usage; -h is left to the caller.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := strings.Replace(err.Error(), ": -", ": --", 1)
	if name := unknownFlag(fs, args); name != "" {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := flagenv.Closest(name, names); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	return fmt.Errorf("%s (payout %s -h lists the flags)", msg, fs.Name())
}

// unknownFlag returns the name of the first flag in args that fs does not
// define, skipping the values of the flags it does define; "" when none.
func unknownFlag(fs *flag.FlagSet, args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return ""
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				continue
			}
			return name
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) {
			i++ // the flag's value
		}
	}
	return ""
}

// parse parses args, then sets every flag not given on the command line
// from its PAYOUT_* environment variable. Flags win over the environment.
//
// Flags may come before, between or after the arguments (`payout load
// FILE --redis URL`); "--" ends the flags.
func parse(e *env, fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := parseQuiet(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return err
			}
			return &exitError{ExitUsage, err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return &exitError{ExitUsage, err}
	}
	lookup := func(k string) (string, bool) { v := e.getenv(k); return v, v != "" }
	notices, err := flagenv.ApplyRule(fs, flagenv.Rule{
		Name: func(f string) string { return envName(fs.Name(), f) },
		Old:  func(f string) string { return oldEnvName(fs.Name(), f) },
	}, lookup)
	for _, n := range notices {
		fmt.Fprintf(e.stderr, "payout %s: warning: %s\n", fs.Name(), n)
	}
	if err != nil {
		return usageErr("%v", err)
	}
	if e.capture == nil {
		warnUnknownEnv(context.Background(), e)
	}
	return nil
}

// logFlags are shared by every command.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), json, text")
}

// logger builds the command's logger on stderr: zerolog JSON when stderr is
// not a terminal, readable text when it is.
func (l *logFlags) logger(e *env) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(l.level)
	if err != nil || l.level == "" {
		return zerolog.Nop(), usageErr("--log-level %q: want debug, info, warn or error", l.level)
	}
	var w io.Writer = e.stderr
	text := l.format == "text"
	if l.format == "auto" {
		if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			text = true
		}
	} else if l.format != "json" && l.format != "text" {
		return zerolog.Nop(), usageErr("--log-format %q: want auto, json or text", l.format)
	}
	if text {
		// Colours only for a terminal: a text log sent to a file, a pipe or
		// journald keeps no ANSI escape codes (nor does one under NO_COLOR).
		w = zerolog.ConsoleWriter{Out: e.stderr, TimeFormat: time.TimeOnly, NoColor: e.getenv("NO_COLOR") != "" || !isTerminal(e.stderr)}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
