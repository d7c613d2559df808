// Command chaos runs the proof-of-safety chaos suite (package
// internal/proof/chaos): real Redis with AOF, the PSP sandbox with faults, three
// payout workers killed at random, a Redis restart and a PSP token
// rotation, every order settling paid or failed with callbacks duplicated,
// reordered and forged, then checks that no payout was created twice or
// lost, that every outcome is the simulator's, that the books reconcile,
// and that no card number or secret leaked.
//
//	go run ./internal/proof/cmd/chaos            # 10,000 rows (make chaos)
//	go run ./internal/proof/cmd/chaos --short    # 1,000 rows (make chaos-short)
//	go run ./internal/proof/cmd/chaos --broken   # 200 rows on the unsafe worker build: passes only if duplicates are found
//	go run ./internal/proof/cmd/chaos --broken-replay  # 200 rows on the worker whose transport may replay creates, same
//
// Every flag also reads PAYOUT_CHAOS_<FLAG> (upper case, dashes as
// underscores); a flag on the command line wins. The last line printed is
// the figures line.
//
// Exit codes: 0 every promise kept (with --broken: duplicates were
// detected), 1 a promise broken (with --broken: no duplicates detected),
// 2 usage error, 3 the run could not be carried out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/acme/payout/internal/proof/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg := chaos.DefaultConfig()
	switch {
	case boolArg(args, lookup, "broken"):
		cfg = chaos.BrokenConfig()
	case boolArg(args, lookup, "broken-replay"):
		cfg = chaos.BrokenReplayConfig()
	case boolArg(args, lookup, "short"):
		cfg = chaos.ShortConfig()
	}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("short", false, "the short run: 1,000 rows, about three minutes (the defaults of the other flags change)")
	chaos.RegisterFlags(fs, &cfg)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: chaos [--short] [flags]\n\nflags (environment variable %s<FLAG>):\n", chaos.EnvPrefix)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaos: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := chaos.ApplyEnv(fs, lookup); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	fig, err := chaos.Run(ctx, cfg, stdout)
	broken := cfg.Broken || cfg.BrokenReplay
	switch {
	case errors.Is(err, chaos.ErrHarness), errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 3
	case broken && fig.Duplicates > 0:
		fmt.Fprintf(stdout, "chaos: the unsafe worker build was caught: %d duplicate orders detected\n", fig.Duplicates)
		return 0
	case broken:
		fmt.Fprintln(stderr, "chaos: the unsafe worker build was NOT caught: no duplicates detected")
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 1
	}
	return 0
}

// boolArg tells whether the boolean flag name is set on the command line
// (or else in its environment variable), before the other flags are
// registered with the defaults it selects.
func boolArg(args []string, lookup func(string) (string, bool), name string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name {
			return true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			b, _ := strconv.ParseBool(v)
			return b
		}
	}
	v, _ := lookup(chaos.EnvName(name))
	b, _ := strconv.ParseBool(v)
	return b
}
