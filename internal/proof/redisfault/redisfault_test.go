package redisfault

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const incrScript = `return redis.call('INCR', KEYS[1])`

func start(t *testing.T, m *miniredis.Miniredis, rules ...Rule) *Proxy {
	t.Helper()
	p, err := Start(Config{Upstream: m.Addr(), Rules: rules, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func client(t *testing.T, p *Proxy, o redis.Options) *redis.Client {
	t.Helper()
	o.Addr = p.Addr()
	c := redis.NewClient(&o)
	t.Cleanup(func() { c.Close() })
	return c
}

func isCut(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// TestRulesSelectAndTheCommandRuns: with go-redis's retries off, a
// dropped reply surfaces as a cut connection, and the command did run
// (the counter it increments moved) exactly once.
func TestRulesSelectAndTheCommandRuns(t *testing.T) {
	script := redis.NewScript(incrScript)
	tests := []struct {
		name  string
		rule  Rule
		calls int
		call  func(ctx context.Context, c *redis.Client) error
		drops int64
	}{
		{"command name, first only", Rule{Commands: []string{"incr"}, Every: 1, Max: 1}, 5,
			func(ctx context.Context, c *redis.Client) error { return c.Incr(ctx, "n").Err() }, 1},
		{"every third", Rule{Commands: []string{"INCR"}, Every: 3}, 9,
			func(ctx context.Context, c *redis.Client) error { return c.Incr(ctx, "n").Err() }, 3},
		{"evalsha by digest", Rule{Commands: []string{"EVALSHA"}, SHA: script.Hash(), Every: 1, Max: 2}, 4,
			func(ctx context.Context, c *redis.Client) error {
				return script.EvalSha(ctx, c, []string{"n"}).Err()
			}, 2},
		{"eval by digest", Rule{SHA: script.Hash(), Every: 2}, 4,
			func(ctx context.Context, c *redis.Client) error { return script.Eval(ctx, c, []string{"n"}).Err() }, 2},
		{"evalsha by script substring", Rule{Commands: []string{"EVALSHA"}, Contains: "redis.call('INCR'", Every: 1, Max: 1}, 3,
			func(ctx context.Context, c *redis.Client) error {
				return script.EvalSha(ctx, c, []string{"n"}).Err()
			}, 1},
		{"argument substring", Rule{Contains: "needle", Every: 1}, 2,
			func(ctx context.Context, c *redis.Client) error { return c.Incr(ctx, "haystack-needle").Err() }, 2},
		{"no match", Rule{Commands: []string{"GET"}, Every: 1}, 3,
			func(ctx context.Context, c *redis.Client) error { return c.Incr(ctx, "n").Err() }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := miniredis.RunT(t)
			p := start(t, m, tc.rule)
			c := client(t, p, redis.Options{MaxRetries: -1})
			// The proxy learns the source of the script it sees loaded.
			if err := script.Load(ctx, c).Err(); err != nil {
				t.Fatal(err)
			}
			failed := 0
			for i := 0; i < tc.calls; i++ {
				if err := tc.call(ctx, c); err != nil {
					if !isCut(err) {
						t.Fatalf("call %d: %v, want a cut connection", i, err)
					}
					failed++
				}
			}
			if p.Drops() != tc.drops || int64(failed) != tc.drops || p.RuleDrops(0) != tc.drops {
				t.Fatalf("drops %d (rule %d), failed calls %d; want %d", p.Drops(), p.RuleDrops(0), failed, tc.drops)
			}
			key := "n"
			if tc.name == "argument substring" {
				key = "haystack-needle"
			}
			if got, _ := m.Get(key); got != strconv.Itoa(tc.calls) {
				t.Fatalf("%s = %q after %d calls: every command must have run once", key, got, tc.calls)
			}
		})
	}
}

// TestGoRedisResendsADroppedCommand shows the failure the proxy exists
// for: with go-redis's default retries a lost reply is invisible to the
// caller, and a non-idempotent command runs twice.
func TestGoRedisResendsADroppedCommand(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	p := start(t, m, Rule{Commands: []string{"INCR"}, Every: 1, Max: 1})
	c := client(t, p, redis.Options{})
	n, err := c.Incr(ctx, "n").Result()
	if err != nil || n != 2 || p.Drops() != 1 {
		t.Fatalf("INCR = %d, %v with %d drops; want 2 (ran twice), nil, 1", n, err, p.Drops())
	}
}

// TestPipelineDropsAtTheSelectedCommand writes four commands in one write:
// the reply before the dropped command arrives, the dropped command runs,
// and the commands after it never reach Redis.
func TestPipelineDropsAtTheSelectedCommand(t *testing.T) {
	m := miniredis.RunT(t)
	p := start(t, m, Rule{Commands: []string{"INCR"}, Every: 1})
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n" +
		"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n" +
		"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n1\r\n" +
		"PING\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read: %v (want EOF after the first reply)", err)
	}
	if string(got) != "+OK\r\n" {
		t.Fatalf("client got %q, want only the first reply", got)
	}
	if v, _ := m.Get("n"); v != "1" {
		t.Fatalf("n = %q: the dropped command must have run", v)
	}
	if m.Exists("b") {
		t.Fatal("a command after the dropped one reached Redis")
	}
	if p.Drops() != 1 {
		t.Fatalf("drops = %d", p.Drops())
	}
}

// TestPipelineWithoutDropsKeepsOrder: a go-redis pipeline of mixed
// commands passes unharmed.
func TestPipelineWithoutDropsKeepsOrder(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	p := start(t, m, Rule{Commands: []string{"DEL"}, Every: 1})
	c := client(t, p, redis.Options{PoolSize: 4})
	cmds, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := 0; i < 200; i++ {
			pl.Set(ctx, "k"+strconv.Itoa(i), i, 0)
			pl.Get(ctx, "k"+strconv.Itoa(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if v := cmds[2*i+1].(*redis.StringCmd).Val(); v != strconv.Itoa(i) {
			t.Fatalf("GET k%d = %q", i, v)
		}
	}

	if p.Drops() != 0 {
		t.Fatalf("drops = %d", p.Drops())
	}
}

// TestInlineCommandsPassThrough: inline commands (which miniredis does
// not speak, hence a line echo server upstream) are forwarded as they are
// and never matched.
func TestInlineCommandsPassThrough(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		rd := bufio.NewReader(c)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte("+" + strings.TrimSpace(line) + "\r\n")); err != nil {
				return
			}
		}
	}()
	p, err := Start(Config{Upstream: ln.Addr().String(), Rules: []Rule{{Every: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PING\r\nECHO hi\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	for _, want := range []string{"+PING\r\n", "+ECHO hi\r\n"} {
		line, err := rd.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("inline reply %q, %v; want %q", line, err, want)
		}
	}
	if p.Drops() != 0 || p.RuleMatches(0) != 0 {
		t.Fatalf("drops %d, matches %d: inline commands are not matched", p.Drops(), p.RuleMatches(0))
	}
}

// TestHandshakePassesThrough: AUTH, SELECT and RESP3's HELLO go to Redis
// as they are; a drop on RESP3 works as on RESP2.
func TestHandshakePassesThrough(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run("resp"+strconv.Itoa(proto), func(t *testing.T) {
			ctx := context.Background()
			m := miniredis.RunT(t)
			m.RequireUserAuth("app", "secret")
			p := start(t, m, Rule{Commands: []string{"INCR"}, Every: 1, Max: 1})
			c := client(t, p, redis.Options{Protocol: proto, Username: "app", Password: "secret", DB: 3})
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if got, _ := m.DB(3).Get("k"); got != "v" {
				t.Fatalf("db 3 k = %q: SELECT did not pass", got)
			}
			if n, err := c.Incr(ctx, "n").Result(); err != nil || n != 2 {
				t.Fatalf("INCR through a drop = %d, %v; want 2 (go-redis re-sent it)", n, err)
			}
			m2, err := c.HGetAll(ctx, "none").Result()
			if err != nil || len(m2) != 0 {
				t.Fatalf("HGETALL = %v, %v", m2, err)
			}
		})
	}
}

// TestSubscribePassesThrough: after SUBSCRIBE the connection is a plain
// pipe and messages reach the subscriber.
func TestSubscribePassesThrough(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	p := start(t, m)
	c := client(t, p, redis.Options{})
	sub := c.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "ch", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil || msg.Payload != "hello" {
		t.Fatalf("message %v, %v", msg, err)
	}
}

// TestProbabilityIsSeeded: the same seed drops the same commands of the
// same sequence.
func TestProbabilityIsSeeded(t *testing.T) {
	run := func() []bool {
		ctx := context.Background()
		m := miniredis.RunT(t)
		p := start(t, m, Rule{Commands: []string{"INCR"}, Probability: 0.3})
		c := client(t, p, redis.Options{MaxRetries: -1, PoolSize: 1})
		var out []bool
		for i := 0; i < 100; i++ {
			out = append(out, c.Incr(ctx, "n").Err() != nil)
		}
		if p.RuleMatches(0) != 100 {
			t.Fatalf("matches = %d", p.RuleMatches(0))
		}
		return out
	}
	a, b := run(), run()
	drops := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d dropped in one run only", i)
		}
		if a[i] {
			drops++
		}
	}
	if drops < 15 || drops > 45 {
		t.Fatalf("%d of 100 dropped at p=0.3", drops)
	}
}

// TestCloseCutsConnections: Close ends the proxy's connections and its
// goroutines.
func TestCloseCutsConnections(t *testing.T) {
	m := miniredis.RunT(t)
	p, err := Start(Config{Upstream: m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING = %q, %v", line, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Close: %v, want EOF", err)
	}
}
