// Command psp-sandbox runs the PSP simulator (package internal/sandbox) as
// its own process: the withdrawal and deposit API of the payment service
// with fault injection, plus an admin API under /sandbox/. It is `payout
// sandbox` under its own name, for images and tests that want the
// simulator without the payout command: the same flags, the same
// environment variables PAYOUT_SANDBOX_<FLAG> (upper case, dashes as
// underscores, e.g. PAYOUT_SANDBOX_P_AMBIGUOUS=0.3; a flag on the command
// line wins), the same logs on stderr.
//
// Exit codes (those of payout): 0 stopped normally (SIGINT/SIGTERM), 2
// usage or configuration error (including an address that cannot be
// bound), 3 the server failed.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/payout/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process around it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return cli.Main(ctx, append([]string{"sandbox"}, args...), nil, stdout, stderr, getenv)
}
