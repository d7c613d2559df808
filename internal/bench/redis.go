package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedis is returned when redis-server is not installed.
var ErrNoRedis = errors.New("redis-server not found in PATH (apt-get install -y redis-server)")

// RedisServer is a redis-server process owned by the bench: no persistence,
// loopback only, its own port and directory.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
}

// URL returns the redis:// URL of database 0.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

// StartRedis starts redis-server on a free loopback port with dir as its
// working directory.
func StartRedis(ctx context.Context, dir string) (*RedisServer, error) {
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
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("bench: start redis-server: %w", err)
		}
		s := &RedisServer{Addr: addr, cmd: cmd}
		if lastErr = waitTCP(ctx, addr, 5*time.Second); lastErr == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, fmt.Errorf("bench: redis-server did not come up: %w", lastErr)
}

// Stop terminates the server and waits for it.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// RedisVersion returns redis_version from INFO server.
func RedisVersion(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("bench: redis INFO: %w", err)
	}
	return infoField(info, "redis_version"), nil
}

// infoField returns the value of key in an INFO answer, or "".
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// CommandStat is one line of INFO commandstats.
type CommandStat struct {
	Name  string
	Calls int64
	Usec  int64
}

// CommandStats parses an INFO commandstats answer, most time first.
func CommandStats(info string) []CommandStat {
	var out []CommandStat
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		st := CommandStat{Name: name}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.Calls = n
			case "usec":
				st.Usec = n
			}
		}
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Usec > out[j].Usec })
	return out
}

// benchCommands are the bench's own commands, left out of FormatStats.
var benchCommands = map[string]bool{"flushall": true, "config|resetstat": true, "info": true}

// FormatStats prints the first k stats as "evalsha 120,000 x 31.0 us",
// leaving out the bench's own commands. The time of EVALSHA includes the
// commands its scripts run, which are also counted under their own names.
func FormatStats(st []CommandStat, k int) string {
	var parts []string
	for _, s := range st {
		if len(parts) == k {
			break
		}
		if benchCommands[s.Name] {
			continue
		}
		per := 0.0
		if s.Calls > 0 {
			per = float64(s.Usec) / float64(s.Calls)
		}
		parts = append(parts, fmt.Sprintf("%s %s x %.1f us", s.Name, thousands(s.Calls), per))
	}
	return strings.Join(parts, ", ")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP polls addr until it accepts a connection or within passes.
func waitTCP(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s not reachable within %s: %w", addr, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
