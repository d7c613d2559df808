// Command payout-replay is payout with a deliberately broken PSP client,
// for the proof of safety only: a create request can be rewound, so Go's
// HTTP/2 transport replays it after a stream reset that came after the
// body was sent (psp.UnsafeReplayableCreate). The chaos suite runs it
// (make chaos BROKEN=2) to show that it detects the duplicate orders such
// a client makes. Never ship: it lives under internal/proof, which no
// shipped binary links.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/payout/internal/cli"
	"github.com/acme/payout/internal/psp"
	"github.com/redis/go-redis/v9"
)

// quietRedis drops go-redis's own pool log lines, as cmd/payout does.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainUnsafe(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ(),
		cli.Unsafe{PSP: psp.UnsafeReplayableCreate()})
	stop()
	os.Exit(code)
}
