// Command payout is the batch payout processor: it loads payout files into
// Redis, runs the workers that create withdrawal orders at the PSP, reports
// results to finance and serves the operators' web UI. Run `payout help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/payout/internal/cli"
	"github.com/redis/go-redis/v9"
)

// quietRedis drops go-redis's own pool log lines: every Redis error reaches
// the command as an error and is reported there, once, with its exit code.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainEnviron(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
