// Command payout-skipcheck is payout with a deliberately broken worker,
// for the proof of safety only: a create task that finds its payout in
// submitting or checking POSTs again instead of checking the status
// (worker.UnsafeSkipSubmittingCheck). The chaos suite runs it
// (make chaos BROKEN=1) to show that it detects the duplicate orders such
// a worker makes. Never ship: it lives under internal/proof, which no
// shipped binary links.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/payout/internal/cli"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
)

// quietRedis drops go-redis's own pool log lines, as cmd/payout does.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainUnsafe(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ(),
		cli.Unsafe{Worker: worker.UnsafeSkipSubmittingCheck()})
	stop()
	os.Exit(code)
}
