// Package redistest runs redis-server for tests, the bench and the chaos
// suite: one node on a free loopback port in its own directory, optionally
// with an AOF that survives a restart on the same port and directory, or
// in cluster mode, and Redis Clusters of such nodes. New gives a test an
// empty database of the server named by PAYOUT_TEST_REDIS_URL instead, when
// that is set. A missing redis-server fails a test under CI=true and skips
// it elsewhere.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/redis/go-redis/v9"
)

// ErrNoRedis is returned when redis-server is not installed.
var ErrNoRedis = errors.New("redis-server not found in PATH (apt-get install -y redis-server)")

// Config says how to run one redis-server.
type Config struct {
	Dir string // working directory: AOF, nodes.conf; required
	// File, if set, is a redis.conf the server reads first; the launcher
	// then sets only the port, bind address, directory and foreground on
	// the command line, so that persistence is as the file says.
	File string
	// Log is the file the server's output is appended to; "" is
	// Dir/redis.log.
	Log string
	// AOF turns on the append-only file with appendfsync always, kept
	// plain text (no RDB preamble, no compression) so that a scan reads
	// every value ever written.
	AOF bool
	// Cluster runs the node in cluster mode; its bus port (PORT+10000) was
	// free as well.
	Cluster bool
	Extra   []string // more arguments, e.g. "--requirepass", "x"
}

// Server is a redis-server process, restartable on the same port and
// directory.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string
	bin  string
	args []string
	log  string
	p    *proc.Proc
}

// Launch starts redis-server as cfg says on a free loopback port and waits
// until it answers PING.
func Launch(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	if cfg.Log == "" {
		cfg.Log = filepath.Join(cfg.Dir, "redis.log")
	}
	var lastErr error
	for try := 0; try < 8; try++ {
		port, err := freePort(cfg.Cluster)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: cfg.Dir,
			bin: bin, args: args(port, cfg), log: cfg.Log}
		if lastErr = s.Restart(ctx); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func freePort(cluster bool) (int, error) {
	if cluster {
		return testenv.FreePortPlus(10000)
	}
	return testenv.FreePort()
}

func args(port int, cfg Config) []string {
	var a []string
	if cfg.File != "" {
		a = append(a, cfg.File)
	}
	a = append(a, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", cfg.Dir, "--daemonize", "no")
	switch {
	case cfg.File != "":
	case cfg.AOF:
		a = append(a, "--save", "", "--protected-mode", "no", "--appendonly", "yes", "--appendfsync", "always",
			"--aof-use-rdb-preamble", "no", "--rdbcompression", "no")
	default:
		a = append(a, "--save", "", "--protected-mode", "no", "--appendonly", "no")
	}
	if cfg.Cluster {
		a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	return append(a, cfg.Extra...)
}

// Restart kills the server if it runs (SIGKILL: a crash) and starts it
// again on the same port and directory; with AOF the data comes back.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	p, err := proc.Start(proc.Spec{Name: "redis-server", Bin: s.bin, Args: s.args, Dir: s.Dir, Log: s.log})
	if err != nil {
		return err
	}
	s.p = p
	if err := waitPing(ctx, s.Addr, p, time.Minute); err != nil {
		p.Kill()
		return err
	}
	return nil
}

// waitPing polls PING until it answers (an error reply such as NOAUTH
// counts: the server is up; LOADING does not: the AOF is still being
// read), the process dies or within passes.
func waitPing(ctx context.Context, addr string, p *proc.Proc, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	return testenv.Poll(ctx, within, 20*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("redis-server exited (code %d): %s", p.ExitCode(), p.Tail(500))
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := c.Ping(pctx).Err()
		var reply redis.Error
		up := errors.As(err, &reply) && !strings.HasPrefix(reply.Error(), "LOADING")
		return err == nil || up, nil
	})
}

// URL returns the redis:// URL of database 0.
func (s *Server) URL() string { return s.DB(0) }

// DB returns the redis:// URL of database db.
func (s *Server) DB(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Kill kills the server with SIGKILL and waits (idempotent).
func (s *Server) Kill() {
	if s.p != nil {
		s.p.Kill()
	}
}

// Stop asks the server to end (SIGTERM) and kills it after grace.
func (s *Server) Stop(grace time.Duration) {
	if s.p != nil {
		_, _ = s.p.Stop(grace)
	}
}

// Client returns a client of database 0; the caller closes it.
func (s *Server) Client() *redis.Client { return redis.NewClient(&redis.Options{Addr: s.Addr}) }
