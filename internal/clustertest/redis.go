package clustertest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/testredis"
	"github.com/redis/go-redis/v9"
)

// Node is a redis-server process owned by a test and stopped at cleanup.
type Node struct {
	Addr string // 127.0.0.1:PORT
	Dir  string // working directory (nodes.conf, redis.log)
	cmd  *exec.Cmd
}

// Stop kills the server (idempotent).
func (n *Node) Stop() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// URL is the redis:// URL of database 0 of the node.
func (n *Node) URL() string { return "redis://" + n.Addr + "/0" }

// Client returns a client of the node, closed at cleanup.
func (n *Node) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NeedTool returns the path of an executable, or fails the test under
// CI=true and skips it elsewhere.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testredis.Missing(t, name+" not found in PATH (apt-get install -y redis-server redis-tools)")
	}
	return p
}

// StartNode runs a redis-server on a free loopback port with persistence off.
// With cluster true it runs in cluster mode; its bus port (PORT+10000) is
// checked to be free as well.
func StartNode(t testing.TB, cluster bool, extra ...string) *Node {
	t.Helper()
	bin := NeedTool(t, "redis-server")
	dir := t.TempDir()
	var lastErr error
	for try := 0; try < 8; try++ {
		port := freePort(t, cluster)
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(dir, "redis.log"),
		}
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		}
		args = append(args, extra...)
		n := &Node{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir}
		n.cmd = exec.Command(bin, args...)
		n.cmd.Dir = dir
		if err := n.cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		if err := waitPing(n.Addr, 10*time.Second); err != nil {
			n.Stop()
			lastErr = err
			continue
		}
		t.Cleanup(n.Stop)
		return n
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

// freePort returns a loopback port that was free a moment ago; for a cluster
// node, PORT+10000 (the cluster bus) was free too.
func freePort(t testing.TB, withBus bool) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := testredis.FreePort(t)
		if !withBus {
			return p
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

func waitPing(addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of masters without replicas on loopback.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts masters cluster-mode redis-server processes, joins
// them with redis-cli --cluster create and waits until every node reports
// cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	cli := NeedTool(t, "redis-cli")
	NeedTool(t, "redis-server")
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		c.Nodes = append(c.Nodes, StartNode(t, true))
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs lists the node addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// URL is the redis-cluster:// URL payout takes in --redis.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs(), ",") }

// Client returns a cluster client, closed at cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// waitOK polls CLUSTER INFO on every node until all say cluster_state:ok and
// know every node.
func (c *Cluster) waitOK(within time.Duration) error {
	deadline := time.Now().Add(within)
	want := fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))
	for {
		var bad string
		for _, n := range c.Nodes {
			info, err := clusterInfo(n.Addr)
			if err != nil {
				bad = fmt.Sprintf("%s: %v", n.Addr, err)
				break
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
				bad = fmt.Sprintf("%s: %s", n.Addr, firstLines(info, 6))
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ok after %s: %s", within, bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clusterInfo(addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.ClusterInfo(ctx).Result()
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "; ")
}
