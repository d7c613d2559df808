// Package ledger keeps the state of batches and payouts in Redis and moves
// payouts between states with compare-and-set Lua scripts.
//
// # States
//
// The payout state machine is declared once, in Machine (the states:
// scheduled, queued, submitting, checking, created, paid, failed, rejected,
// cancelled, needs_review) and Transitions (every allowed move and who may
// make it: loader, worker, reconciler or person); docs/design.md's tables
// are generated from them. Every transition script runs as one role and
// refuses any move the table does not give that role.
// Every transition is one script that checks the current state (and the
// create attempt or status-check sequence the caller acts on) before it
// writes, and moves the batch's per-state counters in the same call, so a
// redelivered or duplicated task can never move a payout backwards or cause
// a second create. The budgets that turn PSP answers into moves are
// decided in Go, without Redis, by package decide: a create's tries
// (decide.Finish, from the count BeginCreate read), a status or outcome
// check's follow-up (decide.Check, decide.Outcome, from the payout and
// Redis's clock as the worker read them before it asked the PSP:
// Ledger.Snapshot). The script compares that read with the stored payout
// and writes the decision, or nothing.
//
// # Parts
//
// The payouts, their batches and their transitions are methods of
// *Ledger. The other concepts are each a type of their own with a narrow
// API, reached from the ledger and sharing its client and actor:
//
//   - Controls (l.Controls(), controls.go): the financial controls: a
//     batch held for approval, its approval (four-eyes, the daily limit)
//     or discard, the day's approved sums.
//   - Audit (l.Audit(), audit.go): the audit trail of a batch and the
//     operators' actions on the queue.
//   - Archive (l.Archive(), archive.go): the ledger's side of archiving a
//     final batch: its summary, the refusal of changes to it, the deletion
//     of its keys.
//   - Claims (l.Claims(), claims.go, claimarchive.go): the externalId
//     claim registry: live claims, and the archived batches' claims for
//     the id window.
//   - Schedule (l.Schedule(), schedule.go): scheduled release: payouts
//     held in state scheduled until their release time, the due indexes,
//     and the compare-and-set that releases them.
//   - Locks (l.Locks(), locks.go): a batch's load lock and the leases of
//     periodic work.
//
// # Keys
//
// The ledger owns every key under PREFIX ("payout"); package keys
// (internal/ledger/keys) builds them all, and code outside the ledger
// reaches them only through its methods, or through the read side
// (package view: the console's pages, search, work queue and history).
// All keys of one batch share the hash tag {BATCH}, so every script
// touches a single Redis Cluster slot:
//
//	PREFIX:{B}:meta               hash   batch metadata (file, loadedAt, rows, total, scale, phase, approval)
//	PREFIX:{B}:p:EXTID            hash   one payout
//	PREFIX:{B}:l:K                zset   externalIds of file lines 128K..128K+127 scored by line (listpack-sized)
//	PREFIX:{B}:lk                 zset   the chunk numbers K in use, for reports in file order
//	PREFIX:{B}:lines              zset   the index before the chunks (all externalIds by line); still read
//	PREFIX:{B}:counts             hash   rows and minor units per state
//	PREFIX:{B}:loadlock           string the loader registering the batch now (expires)
//	PREFIX:{B}:due                zset   the batch's scheduled payouts scored by release time (ms)
//	PREFIX:due                    zset   batches with scheduled payouts, scored by their earliest release (schedule.go)
//	PREFIX:{B}:audit              stream one entry per state change: time, actor, from, to, context
//	PREFIX:{B}:ev                 stream the outbox: one event per payout state change until a worker queues its deliveries
//	PREFIX:{B}:archived           hash   summary of a batch moved into an archive file
//	PREFIX:x:IDKEY                string the live batch that owns an externalId (global uniqueness)
//	PREFIX:xa:G:K                 hash   claims of archived batches, bucket K of generation G (expires)
//	PREFIX:xa:gens                hash   claims and last day per generation of archived claims
//	PREFIX:batches                zset   batch ids scored by load time
//	PREFIX:audit                  stream operator actions that concern no batch (pause, resume)
//	PREFIX:daily:YYYY-MM-DD       string the sum approved on a UTC day, for the daily limit (expires)
//	PREFIX:lease:NAME             string the process doing periodic work NAME now (expires)
//	PREFIX:psp:lookup-sample      string an externalId the PSP created, for the lookup check
//	PREFIX:psp:lookup-verified    string set once the PSP found that order by its externalId
//	PREFIX:metrics:snapshot       string the on-call gauges one worker computed (expires)
//	PREFIX:wh:{EP}:log, :recent   hash, zset an endpoint's last deliveries (package notify), bounded
//	PREFIX:wh:endpoints           hash   endpoint id -> URL of the endpoints delivered to
//	rate:PREFIX:ratelimit:psp     string the workers' shared PSP rate limit (redis_rate)
//	PREFIX:apitoken:SHA           hash   one API token (package api): name, role, created; SHA of the token
//	PREFIX:apitokens              hash   API token name -> SHA
//	PREFIX:idem:TOKEN:SHA         string an Idempotency-Key's record: running (a lease), then the answer (expires)
//	rate:PREFIX:ratelimit:api:T   string an API token's request rate limit (redis_rate)
//
// The reconciler's suspect marks (PREFIX:reconcile:{payouts}:suspect:ID)
// live in the queue's hash slot and belong to package jobs, with Asynq's
// own keys.
package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// ErrNotFound is returned for an unknown batch or payout.
var ErrNotFound = errors.New("ledger: not found")

// ErrConflict is returned when a compare-and-set found another state than the
// one the caller acted on. It is wrapped in a *ConflictError.
var ErrConflict = errors.New("ledger: state changed underneath")

// ConflictError tells what the compare-and-set found.
type ConflictError struct {
	ExternalID string
	Found      lifecycle.State
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ledger: payout %s is %s", e.ExternalID, e.Found)
}

// Is makes errors.Is(err, ErrConflict) match.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Ledger is the Redis store. It is safe for concurrent use.
type Ledger struct {
	rdb   redis.UniversalClient
	now   func() time.Time
	clock func() time.Time // nil: Time asks Redis
	newOp func() string
	actor string // who the transitions are recorded as (audit trail)
	// keys: "|ID|ID|", the data key ids BeginCreate lets a create open
	// (OpeningKeys); "": any.
	keys string
	// watch: how long and how often a paid payout is watched (Watching).
	watch decide.WatchPolicy
}

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock replaces time.Now for the timestamps the ledger writes without
// deciding anything on them (a payout's registration time). Every time a
// decision depends on is Redis's own clock (TIME inside the scripts).
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// WithRedisTime makes Time answer now() instead of asking Redis for its
// clock: for the bench's simulation, whose days are faked, and nothing
// else. In production Redis's clock is the one every decision reads.
func WithRedisTime(now func() time.Time) Option { return func(l *Ledger) { l.clock = now } }

// withOpIDs replaces the operation id generator, for tests that replay a
// transition as a lower layer would.
func withOpIDs(next func() string) Option { return func(l *Ledger) { l.newOp = next } }

// New returns a ledger on rdb.
func New(rdb redis.UniversalClient, opts ...Option) *Ledger {
	l := &Ledger{rdb: rdb, now: time.Now, newOp: randomOp, actor: defaultActor()}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Redis is the client the ledger writes to, for its readers (package
// view: view.New(l.Redis())).
func (l *Ledger) Redis() redis.UniversalClient { return l.rdb }

// As returns a ledger that records its transitions in the audit trail as
// done by actor: a worker's host:pid, an operator's name.
func (l *Ledger) As(actor string) *Ledger {
	c := *l
	c.actor = actor
	return &c
}

func (l *Ledger) nowMillis() int64 { return l.now().UnixMilli() }

// defaultActor is this process: host:pid.
func defaultActor() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// randomOp returns a fresh operation id: every transition call carries one,
// so that a replay of the same call (after a lost reply) is told apart from
// a new call. See luaReplay.
func randomOp() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func msTime(s string) time.Time {
	ms := atoi64(s)
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
