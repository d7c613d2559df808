// Command payoutclock is the payout command line whose workers schedule
// their tasks by a clock off by CHAOS_CLOCK_OFFSET ("-5m", "90s"): the
// chaos suite runs one such worker to show that a wrong clock may only move
// when a task runs, never what it decides (decisions use Redis's clock).
// Test harness only: the clock is injected (queue.WithClock through
// cli.MainWith), and the payout binary has no way to set it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acme/payout/internal/cli"
	"github.com/acme/payout/internal/proof/chaos"
	"github.com/acme/payout/internal/queue"
)

func main() {
	// A value that does not parse stops the process: a run that meant to
	// shift the clock must not run with the right one.
	off, err := time.ParseDuration(os.Getenv(chaos.ClockEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "payoutclock: %s=%q: %v\n", chaos.ClockEnv, os.Getenv(chaos.ClockEnv), err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hooks := cli.Hooks{Queue: []queue.Option{queue.WithClock(func() time.Time { return time.Now().Add(off) })}}
	code := cli.MainWith(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ(), hooks)
	stop()
	os.Exit(code)
}
