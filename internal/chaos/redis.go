package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedis is returned when redis-server is not installed.
var ErrNoRedis = errors.New("redis-server not found in PATH (apt-get install -y redis-server)")

// redisServer is a redis-server subprocess with AOF on (appendfsync
// always) in its own directory, restartable on the same port and data.
type redisServer struct {
	bin     string
	addr    string
	args    []string
	logPath string
	p       *proc
}

// startRedis starts redis-server with its data in dir, on a free loopback
// port.
func startRedis(ctx context.Context, dir, logPath string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r := &redisServer{
			bin: bin, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), logPath: logPath,
			args: []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
				"--save", "", "--appendonly", "yes", "--appendfsync", "always",
				// Rewritten AOFs stay plain text, so that the leak scan
				// reads every value ever written, not LZF-compressed RDB.
				"--aof-use-rdb-preamble", "no", "--rdbcompression", "no",
				"--protected-mode", "no", "--daemonize", "no",
			},
		}
		if lastErr = r.start(ctx); lastErr == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func (r *redisServer) start(ctx context.Context) error {
	p, err := startProc("redis", r.bin, r.args, nil, r.logPath)
	if err != nil {
		return err
	}
	r.p = p
	if err := waitRedis(ctx, r.addr, p, time.Minute); err != nil {
		p.kill()
		return err
	}
	return nil
}

// URL is the redis:// URL of database 0.
func (r *redisServer) URL() string { return "redis://" + r.addr + "/0" }

// kill kills the server with SIGKILL (kill -9).
func (r *redisServer) kill() {
	if r.p != nil {
		r.p.kill()
	}
}

// restart kills the server with SIGKILL and starts it again on the same
// port and directory: the AOF must bring the data back.
func (r *redisServer) restart(ctx context.Context) error {
	r.kill()
	return r.start(ctx)
}

// waitRedis polls PING until it answers, the process dies or within passes.
func waitRedis(ctx context.Context, addr string, p *proc, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	return poll(ctx, within, 20*time.Millisecond, func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("redis-server exited (code %d)", p.exitCode())
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return c.Ping(pctx).Err() == nil, nil
	})
}

// ErrDeadline is returned by poll when the condition did not come true in
// time.
var ErrDeadline = errors.New("deadline passed")

// poll calls cond every interval until it returns true or an error, ctx is
// done or within passes.
func poll(ctx context.Context, within, interval time.Duration, cond func() (bool, error)) error {
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
