// Package redisfault is a TCP proxy between a Redis client and a real Redis
// server that loses replies on purpose: for a command a rule selects, it
// forwards the command, waits for Redis's reply (so the command did run),
// throws the reply away and closes both connections instead of delivering
// it. To the client this is a connection cut after the write, the case in
// which go-redis re-sends the command by itself (MaxRetries) and the
// autopipeliner replays its batch.
//
// The proxy reads RESP requests (arrays of bulk strings) from the client and
// forwards them in order; replies flow back in order, each matched to its
// request, so pipelined requests work and a drop happens exactly at the
// selected command: the replies before it are delivered, nothing after it
// is forwarded. Inline commands, HELLO (RESP3), AUTH and SELECT pass through
// untouched; after a (P|S)SUBSCRIBE or MONITOR the connection becomes a
// plain pipe. A rule selects by command name and, for EVAL and EVALSHA, by
// script digest or by a substring of the script (the proxy remembers the
// source of every script it sees sent with EVAL or SCRIPT LOAD, so EVALSHA
// matches by substring too) or of any argument.
package redisfault

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Rule selects commands whose reply is lost. A command matches when every
// set selector matches; a matching command is dropped every Every-th time,
// or else with probability Probability, until the rule has dropped Max.
type Rule struct {
	// Commands are command names (case-insensitive); empty: any command.
	Commands []string
	// SHA is a script digest: EVALSHA's first argument, or the SHA-1 of
	// EVAL's script.
	SHA string
	// Contains is a substring of the script (EVAL's, or EVALSHA's when the
	// proxy saw the script's source) or of any argument.
	Contains string
	// Every drops matches number Every, 2*Every, ... (1: every match).
	Every int64
	// Probability drops a match with this probability when Every is 0
	// (the proxy's seeded generator decides). With neither, matches are
	// only counted.
	Probability float64
	// Max bounds the drops of this rule; 0: no bound.
	Max int64
}

// Config configures a Proxy.
type Config struct {
	Upstream string // the Redis server, host:port
	Listen   string // the proxy's address; default 127.0.0.1:0
	Rules    []Rule
	Seed     int64          // seeds the generator of probabilistic drops
	Log      zerolog.Logger // each drop is logged at info level; zero value: silent
}

// Proxy is a running fault proxy. It is safe for concurrent use.
type Proxy struct {
	cfg   Config
	ln    net.Listener
	rules []*rule
	drops atomic.Int64

	rndMu sync.Mutex
	rnd   *rand.Rand

	scriptsMu sync.Mutex
	scripts   map[string]string // sha1 -> source

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

type rule struct {
	Rule
	names   map[string]bool
	matches atomic.Int64
	drops   atomic.Int64
}

// Start listens on cfg.Listen and serves until Close.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("redisfault: no upstream address")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("redisfault: listen: %w", err)
	}
	p := &Proxy{cfg: cfg, ln: ln, rnd: rand.New(rand.NewSource(cfg.Seed)),
		scripts: map[string]string{}, conns: map[net.Conn]struct{}{}}
	for _, r := range cfg.Rules {
		x := &rule{Rule: r, names: map[string]bool{}}
		for _, n := range r.Commands {
			x.names[strings.ToUpper(n)] = true
		}
		x.SHA = strings.ToLower(r.SHA)
		p.rules = append(p.rules, x)
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Drops is the number of replies dropped so far.
func (p *Proxy) Drops() int64 { return p.drops.Load() }

// RuleDrops is the number of commands rule i (of Config.Rules) selected
// for a drop.
func (p *Proxy) RuleDrops(i int) int64 { return p.rules[i].drops.Load() }

// RuleMatches is the number of commands rule i matched, dropped or not.
func (p *Proxy) RuleMatches(i int) int64 { return p.rules[i].matches.Load() }

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serve(c)
		}()
	}
}

// pending is a forwarded request whose reply has not come back yet.
type pending struct {
	name string
	drop bool // throw the reply away and cut the connection
	pipe bool // from this reply on, copy the connection as it is
}

func (p *Proxy) serve(client net.Conn) {
	up, err := net.DialTimeout("tcp", p.cfg.Upstream, 5*time.Second)
	if err != nil {
		p.cfg.Log.Warn().Err(err).Str("upstream", p.cfg.Upstream).Msg("redisfault: dial upstream")
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)

	queue := make(chan pending, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer client.Close()
		defer up.Close()
		p.replies(up, client, queue)
	}()
	p.requests(client, up, queue)
	close(queue)
	<-done
}

// requests forwards the client's commands to Redis, in order, and queues
// what to do with each reply. It stops after a command whose reply is to
// be dropped: nothing after it reaches Redis.
func (p *Proxy) requests(client, up net.Conn, queue chan<- pending) {
	rd := bufio.NewReader(client)
	wr := bufio.NewWriter(up)
	var raw bytes.Buffer
	for {
		raw.Reset()
		args, err := readRequest(rd, &raw)
		if err != nil {
			return
		}
		var pd pending
		if len(args) > 0 {
			pd.name = strings.ToUpper(string(args[0]))
			p.learn(pd.name, args)
			pd.drop = p.decide(pd.name, args)
			switch pd.name {
			case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR":
				pd.pipe = true
			}
		}
		queue <- pd
		if _, err := wr.Write(raw.Bytes()); err != nil {
			return
		}
		if pd.drop || pd.pipe || rd.Buffered() == 0 {
			if err := wr.Flush(); err != nil {
				return
			}
		}
		if pd.drop {
			// Wait for the cut; forward nothing more.
			_, _ = io.Copy(io.Discard, client)
			return
		}
		if pd.pipe {
			_, _ = io.Copy(up, rd)
			return
		}
	}
}

// replies delivers Redis's replies to the client, one per queued request,
// and cuts both connections at a dropped one.
func (p *Proxy) replies(up, client net.Conn, queue <-chan pending) {
	rd := bufio.NewReader(up)
	wr := bufio.NewWriter(client)
	var raw bytes.Buffer
	for pd := range queue {
		for {
			raw.Reset()
			push, err := readReply(rd, &raw)
			if err != nil {
				_ = wr.Flush()
				return
			}
			if push && !pd.pipe { // RESP3 out-of-band push: not this request's reply
				if _, err := wr.Write(raw.Bytes()); err != nil {
					return
				}
				continue
			}
			break
		}
		if pd.drop {
			_ = wr.Flush() // the replies before this one arrive, this one does not
			n := p.drops.Add(1)
			p.cfg.Log.Info().Str("command", pd.name).Int64("drops", n).Msg("redisfault: reply dropped, connection cut")
			return
		}
		if _, err := wr.Write(raw.Bytes()); err != nil {
			return
		}
		if pd.pipe {
			if wr.Flush() != nil {
				return
			}
			_, _ = io.Copy(client, rd)
			return
		}
		if rd.Buffered() == 0 || len(queue) == 0 {
			if err := wr.Flush(); err != nil {
				return
			}
		}
	}
}

// learn remembers the source of scripts sent with EVAL or SCRIPT LOAD.
func (p *Proxy) learn(name string, args [][]byte) {
	var src []byte
	switch {
	case (name == "EVAL" || name == "EVAL_RO") && len(args) > 1:
		src = args[1]
	case name == "SCRIPT" && len(args) > 2 && strings.EqualFold(string(args[1]), "LOAD"):
		src = args[2]
	default:
		return
	}
	sum := sha1.Sum(src)
	p.scriptsMu.Lock()
	p.scripts[hex.EncodeToString(sum[:])] = string(src)
	p.scriptsMu.Unlock()
}

// decide tells whether the reply of this command is to be dropped.
func (p *Proxy) decide(name string, args [][]byte) bool {
	for _, r := range p.rules {
		if !p.match(r, name, args) {
			continue
		}
		n := r.matches.Add(1)
		hit := false
		switch {
		case r.Every > 0:
			hit = n%r.Every == 0
		case r.Probability > 0:
			p.rndMu.Lock()
			hit = p.rnd.Float64() < r.Probability
			p.rndMu.Unlock()
		}
		if hit && r.claim() {
			return true
		}
	}
	return false
}

// claim takes one drop from the rule's budget.
func (r *rule) claim() bool {
	for {
		d := r.drops.Load()
		if r.Max > 0 && d >= r.Max {
			return false
		}
		if r.drops.CompareAndSwap(d, d+1) {
			return true
		}
	}
}

func (p *Proxy) match(r *rule, name string, args [][]byte) bool {
	if len(r.names) > 0 && !r.names[name] {
		return false
	}
	script := ""
	isEval := name == "EVAL" || name == "EVAL_RO"
	isEvalSha := name == "EVALSHA" || name == "EVALSHA_RO"
	if (isEval || isEvalSha) && len(args) > 1 {
		sha := strings.ToLower(string(args[1]))
		if isEval {
			sum := sha1.Sum(args[1])
			sha = hex.EncodeToString(sum[:])
			script = string(args[1])
		} else {
			p.scriptsMu.Lock()
			script = p.scripts[sha]
			p.scriptsMu.Unlock()
		}
		if r.SHA != "" && r.SHA != sha {
			return false
		}
	} else if r.SHA != "" {
		return false
	}
	if r.Contains == "" || strings.Contains(script, r.Contains) {
		return true
	}
	for _, a := range args[1:] {
		if bytes.Contains(a, []byte(r.Contains)) {
			return true
		}
	}
	return false
}

// readRequest reads one client request into raw and returns its arguments;
// an inline command is returned as raw bytes with no arguments (it passes
// through unmatched).
func readRequest(rd *bufio.Reader, raw *bytes.Buffer) ([][]byte, error) {
	line, err := readLine(rd, raw)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		return nil, nil // inline command
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return nil, fmt.Errorf("redisfault: bad request header %q", line)
	}
	args := make([][]byte, 0, max(n, 0))
	for range n {
		h, err := readLine(rd, raw)
		if err != nil {
			return nil, err
		}
		if len(h) == 0 || h[0] != '$' {
			return nil, fmt.Errorf("redisfault: request argument is not a bulk string: %q", h)
		}
		size, err := strconv.Atoi(string(h[1:]))
		if err != nil || size < 0 {
			return nil, fmt.Errorf("redisfault: bad bulk length %q", h)
		}
		start := raw.Len()
		if _, err := io.CopyN(raw, rd, int64(size)+2); err != nil {
			return nil, err
		}
		args = append(args, raw.Bytes()[start:start+size])
	}
	return args, nil
}

// readReply reads one complete RESP2/RESP3 reply into raw. push reports a
// RESP3 push (out-of-band data, not the reply to a request).
func readReply(rd *bufio.Reader, raw *bytes.Buffer) (push bool, err error) {
	line, err := readLine(rd, raw)
	if err != nil {
		return false, err
	}
	if len(line) == 0 {
		return false, errors.New("redisfault: empty reply line")
	}
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return false, nil
	case '$', '!', '=':
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return false, fmt.Errorf("redisfault: bad reply length %q", line)
		}
		if size < 0 {
			return false, nil
		}
		_, err = io.CopyN(raw, rd, int64(size)+2)
		return false, err
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return false, fmt.Errorf("redisfault: bad aggregate length %q", line)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if _, err := readReply(rd, raw); err != nil {
				return false, err
			}
		}
		if line[0] == '|' { // an attribute precedes the reply it describes
			return readReply(rd, raw)
		}
		return line[0] == '>', nil
	}
	return false, fmt.Errorf("redisfault: unknown reply type %q", line[0])
}

// readLine appends one CRLF-terminated line to raw and returns it without
// the CRLF.
func readLine(rd *bufio.Reader, raw *bytes.Buffer) ([]byte, error) {
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	raw.Write(line)
	return bytes.TrimRight(line, "\r\n"), nil
}
