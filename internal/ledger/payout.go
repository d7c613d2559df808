package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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
	State       State
	Creates     int // create requests begun (attempt number of the latest)
	Seq         int // status checks scheduled
	Misses      int // consecutive 404s counted toward confirmed absence
	Faults      int // status checks without an answer in this checking episode
	OrderID     string
	PSPStatus   string
	Error       string
	UpdatedAt   time.Time
	// Awaiting: created, and the workers follow the order to its outcome
	// (status query OutcomeSeq is due; needs review after OutcomeDue).
	Awaiting   bool
	OutcomeSeq int
	OutcomeDue time.Time
	// CheckDue is when status check Seq is due on Redis's clock (zero: at
	// once); an earlier run records nothing.
	CheckDue time.Time
	// Set by the last operator resolution of a needs_review payout
	// (resolve.go); empty otherwise.
	ResolvedBy     string
	ResolutionNote string
	ResolvedAt     time.Time
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

var infoChunkLua = strconv.Itoa(infoChunk)

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
		State: State(m["state"]), Creates: atoi("creates"), Seq: atoi("seq"), Misses: atoi("misses"),
		Faults: atoi("faults"), OrderID: m["order"], PSPStatus: m["pspstatus"], Error: m["error"],
		UpdatedAt:  msTime(m["updated"]),
		ResolvedBy: m["rby"], ResolutionNote: m["rnote"], ResolvedAt: msTime(m["rat"]),
		Awaiting: m["track"] == "1" && State(m["state"]) == Created, OutcomeSeq: atoi("oseq"), OutcomeDue: msTime(m["odue"]), CheckDue: msTime(m["due"]),
	}
}

// Owners returns, for each externalId that some batch other than batch
// already owns (a live claim, or an archived batch's claim within the id
// window), that batch. It writes nothing (validation, dry runs).
func (l *Ledger) Owners(ctx context.Context, batch string, ids []string) (map[string]string, error) {
	live, err := l.liveOwners(ctx, batch, ids)
	if err != nil {
		return nil, err
	}
	owned := map[string]string{}
	var check []string
	for i, v := range live {
		if v == "" || v == batch {
			// Batch's own live key does not hide an archived claim: a run
			// may have taken it and died before giving it back.
			check = append(check, ids[i])
		} else {
			owned[ids[i]] = v
		}
	}
	return owned, l.addArchivedOwners(ctx, batch, check, owned)
}

// addArchivedOwners adds to owned the archived owners other than batch of
// ids.
func (l *Ledger) addArchivedOwners(ctx context.Context, batch string, ids []string, owned map[string]string) error {
	arch, err := l.archivedOwners(ctx, ids)
	if err != nil {
		return err
	}
	for id, b := range arch {
		if b != batch {
			owned[id] = b
		}
	}
	return nil
}

// Claim makes batch the owner of each externalId not yet owned. It returns
// the ids owned by another batch (they were not claimed).
func (l *Ledger) Claim(ctx context.Context, batch string, ids []string) (map[string]string, error) {
	_, owners, err := l.ClaimTaken(ctx, batch, ids)
	return owners, err
}

// Release drops batch's claims on ids (used to undo a refused load).
func (l *Ledger) Release(ctx context.Context, batch string, ids []string) error {
	pipe := l.rdb.Pipeline()
	for _, id := range ids {
		releaseForms(ctx, pipe, batch, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("ledger: release externalIds: %w", err)
	}
	return nil
}

// Register stores the payouts that are not stored yet, in state queued, in
// one script call (all keys share the batch's slot). It returns how many
// were new: a rerun after a crash registers only what is missing.
// It checks no load lock: a loader uses RegisterLocked.
func (l *Ledger) Register(ctx context.Context, batch string, ps []NewPayout, scale int) (int, error) {
	return l.register(ctx, batch, "", ps, scale)
}

// RegisterLocked is Register for a loader resuming a batch: it registers
// nothing unless owner holds the batch's load lock (else ErrLoadLockLost)
// and the batch is loading (else ErrNotLoading: payout discard abandoned
// it while this loader's lease had expired).
func (l *Ledger) RegisterLocked(ctx context.Context, batch, owner string, ps []NewPayout, scale int) (int, error) {
	if owner == "" {
		return 0, fmt.Errorf("ledger: register payouts of %s: no load lock owner: %w", batch, ErrLoadLockLost)
	}
	return l.register(ctx, batch, owner, ps, scale)
}

func (l *Ledger) register(ctx context.Context, batch, owner string, ps []NewPayout, scale int) (int, error) {
	if len(ps) == 0 {
		return 0, nil
	}
	keys := make([]string, 0, len(ps)+4)
	keys = append(keys, countsKey(batch), lineChunksKey(batch), metaKey(batch), loadLockKey(batch))
	args := make([]any, 0, 2+9*len(ps))
	args = append(args, l.nowMillis(), owner)
	chunks := map[int64]bool{}
	for _, p := range ps {
		chunks[int64(p.Line)/lineChunk] = true
		keys = append(keys, payoutKey(batch, p.ExternalID))
		args = append(args, p.Line, p.ExternalID, p.Amount.String(), strconv.FormatInt(p.Amount.Minor(scale), 10),
			p.Destination, packSealed(p.Sealed), p.Telecom, p.Extra, p.Info)
	}
	for c := range chunks {
		keys = append(keys, lineChunkKey(batch, c))
	}
	n, err := registerScript.Run(ctx, l.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: register payouts of %s: %w", batch, err)
	case n == -1:
		return 0, fmt.Errorf("ledger: register payouts of %s: %w", batch, ErrLoadLockLost)
	case n == -2:
		return 0, fmt.Errorf("ledger: register payouts of %s: %w", batch, ErrNotLoading)
	}
	return n, nil
}

// ErrLoadLockLost is returned by RegisterNew when the caller no longer
// holds the batch's load lock: nothing was written.
var ErrLoadLockLost = errors.New("ledger: load lock of the batch lost")

// LockLoad takes the batch's load lock for owner (a random token) for ttl.
// It reports false when another loader holds it.
func (l *Ledger) LockLoad(ctx context.Context, batch, owner string, ttl time.Duration) (bool, error) {
	ok, err := l.rdb.SetNX(ctx, loadLockKey(batch), owner, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("ledger: lock load of %s: %w", batch, err)
	}
	return ok, nil
}

// RefreshLoad extends owner's load lock; false means it was lost.
func (l *Ledger) RefreshLoad(ctx context.Context, batch, owner string, ttl time.Duration) (bool, error) {
	n, err := refreshLockScript.Run(ctx, l.rdb, []string{loadLockKey(batch)}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("ledger: refresh load lock of %s: %w", batch, err)
	}
	return n == 1, nil
}

// NewLoadOwner returns a random token for a LockLoad owner: 16 random
// bytes in hex.
func NewLoadOwner() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// UnlockLoad releases owner's load lock (a lock taken over by another
// loader is left alone).
func (l *Ledger) UnlockLoad(ctx context.Context, batch, owner string) error {
	if err := releaseScript.Run(ctx, l.rdb, []string{loadLockKey(batch)}, owner).Err(); err != nil {
		return fmt.Errorf("ledger: unlock load of %s: %w", batch, err)
	}
	return nil
}

// RegisterNew stores payouts that are known not to exist yet, with plain
// commands in one MULTI/EXEC transaction: the same result as Register,
// atomic per call, at a fraction of the Redis time of a Lua loop. It is for
// a batch begun by this very load, whose load lock owner holds: the lock
// key is WATCHed and checked, so the transaction writes nothing (and
// ErrLoadLockLost is returned) unless owner still holds it at EXEC. No
// other loader can have registered rows of the batch meanwhile.
func (l *Ledger) RegisterNew(ctx context.Context, batch, owner string, ps []NewPayout, scale int) error {
	if len(ps) == 0 {
		return nil
	}
	now := l.nowMillis()
	units := make([]int64, len(ps))
	var sum int64
	exact := true // false: the chunk's sum would overflow int64; count per row
	for i, p := range ps {
		units[i] = p.Amount.Minor(scale)
		if sum > math.MaxInt64-units[i] {
			exact = false
		}
		sum += units[i]
	}
	lock := loadLockKey(batch)
	attempt := func(tx *redis.Tx) error {
		held, err := tx.Get(ctx, lock).Result()
		if err != nil && err != redis.Nil {
			return err
		}
		if held != owner {
			return ErrLoadLockLost
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			l.queueNew(ctx, pipe, batch, ps, scale, units, sum, exact, now)
			return nil
		})
		return err
	}
	// An aborted EXEC means the lock key was touched: by the owner's own
	// lease renewal (PEXPIRE), most of the time. Nothing was written; the
	// next attempt reads the lock again and tells a renewal from a loss.
	for range maxRegisterAttempts {
		err := l.rdb.Watch(ctx, attempt, lock)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ledger: register payouts of %s: %w", batch, err)
		}
		return nil
	}
	return fmt.Errorf("ledger: register payouts of %s: the load lock changed during %d attempts: %w", batch, maxRegisterAttempts, ErrLoadLockLost)
}

// maxRegisterAttempts bounds RegisterNew's retries of a transaction whose
// WATCHed load lock was touched (renewed) before its EXEC.
const maxRegisterAttempts = 8

// queueNew queues the writes of RegisterNew.
func (l *Ledger) queueNew(ctx context.Context, pipe redis.Pipeliner, batch string, ps []NewPayout, scale int, units []int64, sum int64, exact bool, now int64) {
	lines := map[int64][]redis.Z{}
	for i, p := range ps {
		fields := []any{"line", p.Line, "ext", p.ExternalID, "amount", p.Amount.String(), "units", units[i],
			"dest", p.Destination, "state", string(Queued), "updated", now}
		if p.Sealed != "" {
			fields = append(fields, "sealed", packSealed(p.Sealed))
		}
		if p.Telecom != "" {
			fields = append(fields, "tel", p.Telecom)
		}
		if p.Extra != "" {
			fields = append(fields, "extra", p.Extra)
		}
		fields = appendInfo(fields, p.Info)
		pipe.HSet(ctx, payoutKey(batch, p.ExternalID), fields...)
		c := int64(p.Line) / lineChunk
		lines[c] = append(lines[c], redis.Z{Score: float64(p.Line), Member: p.ExternalID})
		if !exact {
			pipe.HIncrBy(ctx, countsKey(batch), "u:"+string(Queued), units[i])
		}
	}
	chunks := make([]redis.Z, 0, len(lines))
	for c, zs := range lines {
		pipe.ZAdd(ctx, lineChunkKey(batch, c), zs...)
		chunks = append(chunks, redis.Z{Score: float64(c), Member: c})
	}
	pipe.ZAdd(ctx, lineChunksKey(batch), chunks...)
	pipe.HIncrBy(ctx, countsKey(batch), "n:"+string(Queued), int64(len(ps)))
	if exact {
		pipe.HIncrBy(ctx, countsKey(batch), "u:"+string(Queued), sum)
	}
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

// eachChunk is how many payouts Each reads per round trip.
const eachChunk = 1000

// Each calls fn for every payout of a batch in file line order, reading
// eachChunk payouts per pipelined round trip.
func (l *Ledger) Each(ctx context.Context, batch string, fn func(Payout) error) error {
	return l.EachRaw(ctx, batch, func(p RawPayout) error { return fn(parsePayout(batch, p.Fields)) })
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
