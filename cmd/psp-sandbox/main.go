// Command psp-sandbox runs the PSP simulator (package internal/sandbox) as
// its own process: the withdrawal and deposit API of the payment service
// with fault injection, plus an admin API under /sandbox/.
//
// Every flag may also be given by an environment variable
// PAYOUT_SANDBOX_<FLAG> (upper case, dashes as underscores), e.g.
// PAYOUT_SANDBOX_P_AMBIGUOUS=0.3; a flag on the command line wins.
//
// Exit codes: 0 stopped normally (SIGINT/SIGTERM), 1 the server failed,
// 2 usage or configuration error (including an address that cannot be
// bound).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/payout/internal/flagenv"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/sandbox"
)

// EnvPrefix is the prefix of the environment variables read for flags.
const EnvPrefix = "PAYOUT_SANDBOX_"

// DefaultAddr binds to loopback: the admin API has no auth.
const DefaultAddr = "127.0.0.1:8090"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, isTerminal(os.Stdout), nil))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// run is main without the process around it. ready, if not nil, receives
// the bound address once the server listens.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, tty bool, ready chan<- string) int {
	fs := flag.NewFlagSet("psp-sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := sandbox.RegisterFlags(fs)
	addr := fs.String("addr", DefaultAddr, "listen address (keep it on loopback: the admin API has no auth)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: psp-sandbox [flags]\n\nPSP simulator with fault injection. Flags (env %s<FLAG>):\n", EnvPrefix)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "psp-sandbox: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := flagenv.Apply(fs, func(f string) string { return flagenv.Name(EnvPrefix, f) }, lookupEnv); err != nil {
		fmt.Fprintf(stderr, "psp-sandbox: %v\n", err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "psp-sandbox: %v\n", err)
		return 2
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil || lvl == zerolog.NoLevel {
		fmt.Fprintf(stderr, "psp-sandbox: unknown log level %q\n", *level)
		return 2
	}

	var out io.Writer = stdout
	if tty {
		out = zerolog.ConsoleWriter{Out: stdout, TimeFormat: "15:04:05.000"}
	}
	log := zerolog.New(out).Level(lvl).With().Timestamp().Str("service", "psp-sandbox").Logger()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "psp-sandbox: listen %s: %v\n", *addr, err)
		return 2
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	srv := sandbox.New(*cfg, log)
	if err := srv.Serve(ctx, ln); err != nil {
		log.Error().Err(err).Msg("psp sandbox failed")
		return 1
	}
	return 0
}

// applyEnv sets every flag not given on the command line from the
// environment variable prefix+FLAG_NAME, if set. Errors name the variable,
// never its value (it may be the token).
