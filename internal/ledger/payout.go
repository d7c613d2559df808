package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/redis/go-redis/v9"
)

// SealAD is the additional data that binds a sealed card number to its
// payout: a ciphertext copied onto another payout does not decrypt.
func SealAD(batch, externalID string) string { return batch + ":" + externalID }

// NewPayout is a validated row to register.
type NewPayout struct {
	Line        int
	ExternalID  string
	Amount      money.Amount
	Destination string // masked display form
	Sealed      string // encrypted card number, or ""
	Telecom     string // telecom operator, or ""
	Extra       string // JSON of further destination properties, or ""
	Info        string // the row's informational values (PackInfo), or ""
	// Velocity is the count the row made toward its recipient's velocity
	// limit (VelocityMark: day and destination tag), or "": given back
	// when a person cancels the payout.
	Velocity string
	// ReleaseAt is the row's release time (zero: none). Register does not
	// store it: the loader schedules the payout after (Schedule.PutLocked).
	ReleaseAt time.Time
}

// Payout is the stored state of one payout.
type Payout struct {
	Batch       string
	ExternalID  string
	Line        int
	Amount      string // exact decimal text
	Destination string
	Sealed      string
	Telecom     string
	Extra       string
	Info        string // informational values (UnpackInfo), never sent to the PSP
	State       lifecycle.State
	Creates     int // create requests begun (attempt number of the latest)
	Tries       int // create tries that provably did not reach the PSP (CreateResult.MaxTries)
	Seq         int // status checks scheduled
	Misses      int // consecutive 404s counted toward confirmed absence
	// LastMiss is when the last counted 404 was recorded (Redis's clock;
	// zero: none in this checking episode).
	LastMiss  time.Time
	Faults    int // status checks without an answer in this checking episode
	OrderID   string
	PSPStatus string
	Error     string
	UpdatedAt time.Time
	// ReleaseAt is when a scheduled payout is released (zero: no release
	// time; kept after the release, for the pages).
	ReleaseAt time.Time
	// Awaiting: created, and the workers follow the order to its outcome
	// (status query OutcomeSeq is due; needs review after OutcomeDue).
	Awaiting     bool
	OutcomeSeq   int
	OutcomePolls int // outcome checks answered without a final status
	OutcomeDue   time.Time
	// CheckDue is when status check Seq is due on Redis's clock (zero: at
	// once); an earlier run records nothing.
	CheckDue time.Time
	// Watch is the watch of a paid payout (watch.go); Return what the PSP
	// said when the money came back (state returned).
	Watch  decide.WatchState
	Return Return
	// Checks counts the status checks answered and recorded, of an
	// unknown create's outcome and of a created order's outcome alike
	// (payout history).
	Checks int
	// Set by the last operator resolution of a needs_review payout
	// (resolve.go); empty otherwise.
	ResolvedBy     string
	ResolutionNote string
	ResolvedAt     time.Time
	// Proposal is a resolution one person proposed under four-eyes that
	// waits for a second person (Resolution.FourEyes); nil when none is
	// pending: only a payout in needs_review, in the stay it was proposed
	// in, has one.
	Proposal *Proposal
	// proposedBy is who proposed the last proposal, pending or not.
	proposedBy string
}

// Proposal is a resolution of a payout in needs_review that one person
// proposed under four-eyes and a second person must confirm.
type Proposal struct {
	To        lifecycle.State // lifecycle.Created or lifecycle.Rejected
	OrderID   string
	PSPStatus string
	By        string
	Note      string
	At        time.Time
}

// infoSep separates the informational values of a payout, and the names
// of a batch's informational columns: a control character, which a
// payout file's values never hold (payfile refuses them).
const infoSep = "\x1f"

// PackInfo is the stored form of a row's informational values: joined by
// US (0x1F), trailing empty values left off; "" when all are empty (no
// field is stored). About one byte a value more than the values.
func PackInfo(values []string) string {
	for len(values) > 0 && values[len(values)-1] == "" {
		values = values[:len(values)-1]
	}
	return strings.Join(values, infoSep)
}

// infoChunk is the most bytes of informational values one hash field
// holds: Redis keeps a hash compact (a listpack) only while every value is
// at most hash-max-listpack-value bytes, 64 by default; one longer value
// turns the payout's hash into a table about three times its size. Longer
// values go into fields info, info1, info2... of infoChunk bytes.
const infoChunk = 64

// appendInfo appends to fields the hash fields of packed informational
// values (none for "").
func appendInfo(fields []any, info string) []any {
	for n := 0; n*infoChunk < len(info); n++ {
		name := "info"
		if n > 0 {
			name += strconv.Itoa(n)
		}
		fields = append(fields, name, info[n*infoChunk:min(len(info), (n+1)*infoChunk)])
	}
	return fields
}

// joinInfo reads back what appendInfo stored.
func joinInfo(m map[string]string) string {
	info, ok := m["info"]
	if !ok {
		return ""
	}
	for n := 1; ; n++ {
		part, ok := m["info"+strconv.Itoa(n)]
		if !ok {
			return info
		}
		info += part
	}
}

// UnpackInfo returns the informational values of a stored payout, in the
// order of its batch's InfoColumns; trailing empty values are left off
// (nil for none).
func UnpackInfo(info string) []string {
	if info == "" {
		return nil
	}
	return strings.Split(info, infoSep)
}

func parsePayout(batch string, m map[string]string) Payout {
	atoi := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	return Payout{
		Batch: batch, ExternalID: m["ext"], Line: atoi("line"), Amount: m["amount"],
		Destination: m["dest"], Sealed: unpackSealed(m["sealed"]), Telecom: m["tel"], Extra: m["extra"], Info: joinInfo(m),
		State: lifecycle.State(m["state"]), Creates: atoi("creates"), Tries: atoi("tries"), Seq: atoi("seq"), Misses: atoi("misses"),
		LastMiss: msTime(m["lastmiss"]), Faults: atoi("faults"), OrderID: m["order"], PSPStatus: m["pspstatus"], Error: m["error"],
		UpdatedAt: msTime(m["updated"]), ReleaseAt: msTime(m["rel"]),
		ResolvedBy: m["rby"], ResolutionNote: m["rnote"], ResolvedAt: msTime(m["rat"]),
		Proposal: parseProposal(m), proposedBy: m["pby"],
		Awaiting: m["track"] == "1" && lifecycle.State(m["state"]) == lifecycle.Created, OutcomeSeq: atoi("oseq"), OutcomePolls: atoi("opolls"), Checks: atoi("checks"), OutcomeDue: msTime(m["odue"]), CheckDue: msTime(m["due"]),
		Watch: parseWatch(m), Return: parseReturn(m),
	}
}

// parseProposal is the pending proposal of a stored payout, or nil.
func parseProposal(m map[string]string) *Proposal {
	if lifecycle.State(m["state"]) != lifecycle.NeedsReview || m["pkey"] == "" || m["pentered"] != m["entered"] {
		return nil
	}
	return &Proposal{To: lifecycle.State(m["pto"]), OrderID: m["porder"], PSPStatus: m["pstatus"], By: m["pby"], Note: m["pnote"], At: msTime(m["pat"])}
}

// Register stores the payouts that are not stored yet, in state queued,
// in script calls of at most registerCall payouts (nextCall), pipelined
// (all keys share the batch's slot). It returns how many were new: a
// rerun after a crash registers only what is missing.
// It checks no load lock: a loader uses RegisterLocked.
func (l *Ledger) Register(ctx context.Context, batch string, ps []NewPayout, scale int) (int, error) {
	return l.register(ctx, batch, "", ps, scale)
}

// RegisterLocked is Register for a loader: every script call registers
// nothing unless owner holds the batch's load lock (else ErrLoadLockLost)
// and the batch is loading (else errNotLoading: payout discard abandoned
// it while this loader's lease had expired). Each call is atomic, the
// calls of one RegisterLocked are not: a load that fails between them has
// registered some of ps, which its rerun skips.
func (l *Ledger) RegisterLocked(ctx context.Context, batch, owner string, ps []NewPayout, scale int) (int, error) {
	if owner == "" {
		return 0, fmt.Errorf("ledger: register payouts of %s: no load lock owner: %w", batch, ErrLoadLockLost)
	}
	return l.register(ctx, batch, owner, ps, scale)
}

// registerCall is the most payouts one registerScript call registers:
// about half a millisecond of Redis, so that the workers' transitions
// are not held up behind a load; a chunk of a load is several calls in
// one round trip. A call holds the payouts of one line chunk (a run of
// consecutive payouts whose lines fall in it): a loader's call fills its
// chunk's key at once, in one ZADD into an empty listpack, rather than
// adding lines above those of an earlier call (each one scanned to the
// end of the listpack).
const registerCall = lineChunk

// nextCall is the length of ps's first script call: at most registerCall
// payouts, all in the line chunk of the first.
func nextCall(ps []NewPayout) int {
	c := ps[0].Line / lineChunk
	n := 1
	for n < len(ps) && n < registerCall && ps[n].Line/lineChunk == c {
		n++
	}
	return n
}

func (l *Ledger) register(ctx context.Context, batch, owner string, ps []NewPayout, scale int) (int, error) {
	if len(ps) == 0 {
		return 0, nil
	}
	now := l.nowMillis()
	pipe := l.rdb.Pipeline()
	var calls []*redis.Cmd
	var parts [][]NewPayout
	for len(ps) > 0 {
		part := ps[:nextCall(ps)]
		ps = ps[len(part):]
		keys, args := registerArgs(batch, owner, part, scale, now)
		calls = append(calls, registerScript.EvalSha(ctx, pipe, keys, args...))
		parts = append(parts, part)
	}
	_, _ = pipe.Exec(ctx) // each call's error is read below
	n := 0
	var lost error
	for i, c := range calls {
		if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			// The script was not cached (a new or restarted Redis): this
			// call ran nothing; EVAL it (which caches it).
			keys, args := registerArgs(batch, owner, parts[i], scale, now)
			c = registerScript.Eval(ctx, l.rdb, keys, args...)
		}
		added, err := c.Int()
		switch {
		case err != nil:
			return n, fmt.Errorf("ledger: register payouts of %s: %w", batch, err)
		case added == -1:
			lost = ErrLoadLockLost
		case added == -2:
			lost = errNotLoading
		default:
			n += added
		}
	}
	if lost != nil {
		return n, fmt.Errorf("ledger: register payouts of %s: %w", batch, lost)
	}
	return n, nil
}

// registerArgs are the keys and arguments of one registerScript call.
func registerArgs(batch, owner string, ps []NewPayout, scale int, now int64) ([]string, []any) {
	keys := make([]string, 0, len(ps)+6)
	keys = append(keys, countsKey(batch), lineChunksKey(batch), metaKey(batch), loadLockKey(batch))
	args := make([]any, 2, 2+20*len(ps))
	args[0] = owner
	var sum int64
	exact := true      // false: the sum would overflow an int64; the script counts per payout
	var chunks []int64 // a call's lines fall in a chunk or two
	for _, p := range ps {
		units := p.Amount.Minor(scale)
		if units < 0 || sum > math.MaxInt64-units {
			exact = false
		}
		sum += units
		keys = append(keys, payoutKey(batch, p.ExternalID))
		c := int64(p.Line) / lineChunk
		if !slices.Contains(chunks, c) {
			chunks = append(chunks, c)
		}
		at := len(args)
		args = append(args, 0, c)
		args = registerFields(args, p, units, now)
		args[at] = len(args) - at - 2
	}
	for _, c := range chunks {
		keys = append(keys, lineChunkKey(batch, c))
	}
	args[1] = ""
	if exact {
		args[1] = strconv.FormatInt(sum, 10)
	}
	return keys, args
}

// registerFields appends the hash fields of a new payout: line, ext,
// amount and units first (registerScript reads them there), then the
// others; empty fields and zero counters are not stored (the scripts read
// a missing field as "" or 0).
func registerFields(args []any, p NewPayout, units, now int64) []any {
	args = append(args, "line", p.Line, "ext", p.ExternalID, "amount", p.Amount.String(), "units", units,
		"dest", p.Destination, "state", string(lifecycle.Queued), "updated", now)
	if p.Sealed != "" {
		args = append(args, "sealed", packSealed(p.Sealed))
	}
	if p.Telecom != "" {
		args = append(args, "tel", p.Telecom)
	}
	if p.Extra != "" {
		args = append(args, "extra", p.Extra)
	}
	if p.Velocity != "" {
		args = append(args, "vel", p.Velocity)
	}
	return appendInfo(args, p.Info)
}

// Get returns one payout, or ErrNotFound.
func (l *Ledger) Get(ctx context.Context, batch, ext string) (Payout, error) {
	m, err := l.rdb.HGetAll(ctx, payoutKey(batch, ext)).Result()
	if err != nil {
		return Payout{}, fmt.Errorf("ledger: read payout %s: %w", ext, err)
	}
	if len(m) == 0 {
		return Payout{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return parsePayout(batch, m), nil
}

// snapshotScript reads a payout and the clock of the Redis that holds it,
// in one atomic call: under Redis Cluster the node of the payout's slot,
// whose clock its transition scripts read (a TIME of its own would go to
// any node).
//
//	KEYS[1] payout
//
// Replies {seconds, microseconds, field, value, ...}; no fields: no such
// payout.
var snapshotScript = redis.NewScript(`
local r = redis.call('TIME')
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do r[#r + 1] = all[i] end
return r
`)

// Snapshot reads one payout and Redis's clock in one call
// (snapshotScript): the payout, and what a status or outcome check decides
// from (decide.Snapshot), or ErrNotFound.
func (l *Ledger) Snapshot(ctx context.Context, batch, ext string) (Payout, decide.Snapshot, error) {
	res, err := snapshotScript.Run(ctx, l.rdb, []string{payoutKey(batch, ext)}).StringSlice()
	if err != nil {
		return Payout{}, decide.Snapshot{}, fmt.Errorf("ledger: read payout %s: %w", ext, err)
	}
	if len(res) < 2 || len(res)%2 != 0 {
		return Payout{}, decide.Snapshot{}, fmt.Errorf("ledger: read payout %s: reply of %d elements", ext, len(res))
	}
	if len(res) == 2 {
		return Payout{}, decide.Snapshot{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	sec, err1 := strconv.ParseInt(res[0], 10, 64)
	usec, err2 := strconv.ParseInt(res[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Payout{}, decide.Snapshot{}, fmt.Errorf("ledger: read payout %s: Redis time %q %q: %w", ext, res[0], res[1], err)
	}
	now := time.Unix(sec, usec*int64(time.Microsecond))
	if l.clock != nil {
		now = l.clock()
	}
	m := make(map[string]string, len(res)/2-1)
	for i := 2; i < len(res); i += 2 {
		m[res[i]] = res[i+1]
	}
	p := parsePayout(batch, m)
	return p, p.decision(time.UnixMilli(now.UnixMilli()).UTC()), nil
}

// decision is what a status or outcome check decides from, of p read at
// now (Redis's clock).
func (p Payout) decision(now time.Time) decide.Snapshot {
	return decide.Snapshot{
		Batch: p.Batch, ExternalID: p.ExternalID, State: p.State, Creates: p.Creates, Seq: p.Seq,
		Misses: p.Misses, LastMiss: p.LastMiss, Faults: p.Faults, CheckDue: p.CheckDue, PSPStatus: p.PSPStatus,
		Awaiting: p.Awaiting, OutcomeSeq: p.OutcomeSeq, OutcomePolls: p.OutcomePolls, OutcomeDue: p.OutcomeDue,
		Watch: p.Watch, Now: now,
	}
}

// eachChunk is how many payouts the ledger's walks of a batch (each,
// the sweeps) read per round trip.
const eachChunk = 1000

// each calls fn for every payout of a batch in file line order, reading
// eachChunk payouts per pipelined round trip (the write side's walk:
// DiscardBatch; package view's Each is the readers').
func (l *Ledger) each(ctx context.Context, batch string, fn func(Payout) error) error {
	return l.eachIDs(ctx, batch, func(ids []string) error {
		hashes, err := l.readPayouts(ctx, batch, ids)
		if err != nil {
			return err
		}
		for _, m := range hashes {
			if err := fn(parsePayout(batch, m)); err != nil {
				return err
			}
		}
		return nil
	})
}

// readPayouts reads the whole hashes of ids in one pipelined round trip
// (an empty map for a payout that is gone).
func (l *Ledger) readPayouts(ctx context.Context, batch string, ids []string) ([]map[string]string, error) {
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, payoutKey(batch, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ledger: read payouts of %s: %w", batch, err)
	}
	out := make([]map[string]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}
