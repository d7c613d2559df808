// Package testenv holds what the test machine gives the tests, the bench and
// the chaos suite: free loopback ports, required tools (a missing one fails
// under CI=true and skips elsewhere), an environment without the developer's
// PAYOUT_* settings, and polling with a deadline. Its sub-packages run
// processes (proc), redis-server (redistest) and go build (gobuild), and
// compare golden files (golden).
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePortPlus returns a free loopback port PORT for which PORT+offset was
// free too (a Redis Cluster node's bus port is PORT+10000).
func FreePortPlus(offset int) (int, error) {
	for i := 0; i < 100; i++ {
		p, err := FreePort()
		if err != nil {
			return 0, err
		}
		if p+offset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+offset)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("free port: no free pair PORT, PORT+%d", offset)
}

// Port returns a free loopback port or fails the test.
func Port(t testing.TB) int {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ClosedAddr returns a loopback host:port on which nothing listened a
// moment ago: a dead peer for dial errors, or an address to listen on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// Missing fails the test under CI=true and skips it elsewhere: on CI every
// tool a test needs must be installed.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", why)
	}
	t.Skip(why)
}

// NeedTool returns the path of an executable; a missing one is Missing.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" not found in PATH ("+installHint(name)+")")
	}
	return p
}

func installHint(name string) string {
	switch name {
	case "redis-server", "redis-cli":
		return "apt-get install -y redis-server redis-tools"
	case "prometheus", "promtool":
		return "apt-get install -y prometheus"
	case "nginx":
		return "apt-get install -y nginx"
	case "go":
		return "the go command builds the binaries under test"
	}
	return "install it"
}

// CleanEnv is the current environment without any PAYOUT_* variable (so no
// setting of the developer leaks into a subprocess), plus extra.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYOUT_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// ErrDeadline is returned by Poll when the condition did not come true in
// time.
var ErrDeadline = errors.New("deadline passed")

// Poll calls cond every interval until it returns true or an error, ctx is
// done or within passes (ErrDeadline).
func Poll(ctx context.Context, within, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s)", ErrDeadline, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Eventually polls cond every 5 ms until it holds, and fails the test
// ("timed out waiting for what") when it does not within 5 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := Poll(context.Background(), 5*time.Second, 5*time.Millisecond, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}
