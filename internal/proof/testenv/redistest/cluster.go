package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas on loopback.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters cluster-mode redis-server processes for this
// test, joins them with redis-cli --cluster create and waits until every
// node reports cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	cli := testenv.NeedTool(t, "redis-cli")
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		c.Nodes = append(c.Nodes, StartConfig(t, Config{Cluster: true}))
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
	want := fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))
	var bad string
	err := testenv.Poll(context.Background(), within, 100*time.Millisecond, func() (bool, error) {
		bad = ""
		for _, n := range c.Nodes {
			info, err := clusterInfo(n.Addr)
			if err != nil {
				bad = fmt.Sprintf("%s: %v", n.Addr, err)
				return false, nil
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
				bad = fmt.Sprintf("%s: %s", n.Addr, firstLines(info, 6))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster not ok: %w: %s", err, bad)
	}
	return nil
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
