package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/redis/go-redis/v9"
)

// Batch is the metadata of one loaded file.
type Batch struct {
	ID       string
	File     string // base name of the file when it was first loaded
	LoadedAt time.Time
	Rows     int64        // rows registered (valid rows)
	Total    money.Amount // sum of the registered rows
	Scale    int
	Phase    string
	Reported bool // the final result file was written (spool mode)
	// TasksPending: the batch is loaded but its loader has not confirmed
	// that every queued payout has its create task (a rerun of the file,
	// or the reconciler, enqueues the missing ones).
	TasksPending bool
	// Abandoned: the batch was discarded while loading (an interrupted
	// load given up by payout discard): its claims were released.
	Abandoned bool
	// Approval: who loaded the batch, why it waits (PhaseAwaiting), and
	// who approved or discarded it, when, with what note.
	LoadedBy   string
	WaitReason string
	DecidedBy  string
	DecidedAt  time.Time
	Note       string
	// FourEyes: the batch was loaded under the four-eyes policy (payout
	// load --four-eyes, PAYOUT_FOUR_EYES): whoever loaded it (LoadedBy)
	// cannot approve it, whatever the approver asks; every approval path
	// (payout approve, the UI) goes through Approve, which enforces it
	// (Batch.mayApprove). False for a batch recorded before
	// the policy was recorded on batches: the approver's deployment
	// policy (Approval.FourEyes) still applies to it.
	FourEyes bool
	// InfoColumns name the file's informational columns (payfile
	// Summary.Info), whose values each payout keeps in Payout.Info.
	InfoColumns []string
	// Reading is the canonical encoding of the options that decide what
	// a row of the file means (amount format, scale, ...), recorded by
	// BeginBatch: a load resuming the batch must read the file the same
	// way. Empty for a batch recorded before it was recorded.
	Reading string
	// Policy is the approval policy the batch was begun under (opaque to
	// the ledger, recorded by BeginBatch): a load resuming it decides
	// with it, whatever its own options.
	Policy string
	// Decided: the load recorded its approval decision (HoldReason, ""
	// to go at once, and Reserved: the day's sum was reserved for it)
	// before registering its first row; a resuming load reuses it.
	Decided    bool
	HoldReason string
	Reserved   bool
	// Need, NeedRole and Rule are the approval rule the batch was held
	// under (package approval; recorded with its figures, before its first
	// row, so that a change of the rules file leaves a waiting batch
	// alone): Need distinct people holding NeedRole, never its loader,
	// approve it. Need 0: no rule, one approval as before.
	Need     int
	NeedRole string
	Rule     string // the rule as written, with its file and line
	// Approvers are the approvals recorded so far (the last one moved the
	// batch to loaded), in the order they were given.
	Approvers []Approver
	// HeldAt is when the batch began to await approval; ExpiresAt when
	// its approval request expires (zero: never), Expiry how long it was
	// given. ExpiredDiscard: the reconciler discarded it as expired.
	HeldAt         time.Time
	ExpiresAt      time.Time
	Expiry         time.Duration
	ExpiredDiscard bool
}

// errNotLoading is returned by the steps of a load (SetBatchFigures,
// FinishLoad, FinishBatch) on a batch that is no longer loading: it was
// discarded (payout discard), or finished by another load.
var errNotLoading = errors.New("ledger: the batch is no longer loading")

// BeginBatch registers a batch in phase loading unless it exists. It returns
// the stored batch and whether this call created it.
func (l *Ledger) BeginBatch(ctx context.Context, b Batch) (Batch, bool, error) {
	args := []any{
		"id", b.ID, "file", b.File, "loaded", b.LoadedAt.UnixMilli(), "rows", b.Rows,
		"total", b.Total.String(), "scale", b.Scale, "phase", lifecycle.PhaseLoading, "by", b.LoadedBy,
		"fe", boolField(b.FourEyes),
	}
	if b.Reading != "" {
		args = append(args, "reading", b.Reading)
	}
	if b.Policy != "" {
		args = append(args, "policy", b.Policy)
	}
	if len(b.InfoColumns) > 0 {
		args = append(args, "info", strings.Join(b.InfoColumns, infoSep))
	}
	res, err := beginBatchScript.Run(ctx, l.rdb, []string{metaKey(b.ID)}, args...).StringSlice()
	if err != nil {
		return Batch{}, false, fmt.Errorf("ledger: begin batch %s: %w", b.ID, err)
	}
	stored := parseBatch(pairs(res[1:]))
	// Indexed on every call (NX keeps the first time): a crash between the
	// two writes must not leave a batch that status and reports never see.
	if err := l.rdb.ZAddNX(ctx, batchesKey(), redis.Z{Score: float64(stored.LoadedAt.UnixMilli()), Member: b.ID}).Err(); err != nil {
		return Batch{}, false, fmt.Errorf("ledger: index batch %s: %w", b.ID, err)
	}
	return stored, res[0] == "1", nil
}

// loadStepScript writes fields of a batch's metadata only if the batch is
// loading and, unless ARGV[1] is empty, its load lock is owner's: a loader
// whose lease expired (and whose batch payout discard may have abandoned
// meanwhile) writes nothing; without an owner (FinishBatch) a batch
// loaded already is written again. KEYS: meta, load lock; ARGV: owner,
// field/value pairs. Replies "ok", "lock" (the lock is not owner's) or the
// phase found ("" for no batch).
var loadStepScript = redis.NewScript(`
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 'lock' end
local ph = redis.call('HGET', KEYS[1], 'phase')
if ph ~= 'loading' and not (ARGV[1] == '' and ph == 'loaded') then return ph or '' end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 'ok'
`)

// loadStep runs loadStepScript; what names the step in errors.
func (l *Ledger) loadStep(ctx context.Context, id, owner, what string, fields ...any) error {
	args := append([]any{owner}, fields...)
	r, err := loadStepScript.Run(ctx, l.rdb, []string{metaKey(id), loadLockKey(id)}, args...).Text()
	switch {
	case err != nil:
		return fmt.Errorf("ledger: %s %s: %w", what, id, err)
	case r == "lock":
		return fmt.Errorf("ledger: %s %s: %w", what, id, ErrLoadLockLost)
	case r != "ok":
		if r == "" {
			r = "gone"
		}
		return fmt.Errorf("ledger: %s %s: it is %s: %w", what, id, r, errNotLoading)
	}
	return nil
}

// FinishLoad marks a batch loaded, as its loader: every row is
// registered, and its create tasks may now be enqueued (TasksPending
// until TasksEnqueued). Workers send no create for a batch before this
// (BeginCreate holds them). It is a compare-and-set: only while owner
// holds the batch's load lock (else ErrLoadLockLost) and the batch is
// loading (else errNotLoading: a batch discarded meanwhile stays so).
func (l *Ledger) FinishLoad(ctx context.Context, id, owner string) error {
	if owner == "" {
		return fmt.Errorf("ledger: finish batch %s: no load lock owner: %w", id, ErrLoadLockLost)
	}
	return l.loadStep(ctx, id, owner, "finish batch", "phase", lifecycle.PhaseLoaded, "tasks", "pending")
}

// FinishBatch marks a batch loaded without a load lock (tests and tools
// that build batches by hand; a loader uses FinishLoad): only a batch
// that is loading or loaded (else errNotLoading: a discarded batch, or
// one awaiting approval, stays so).
func (l *Ledger) FinishBatch(ctx context.Context, id string) error {
	return l.loadStep(ctx, id, "", "finish batch", "phase", lifecycle.PhaseLoaded, "tasks", "pending")
}

// TasksEnqueued records that every queued payout of a loaded batch has its
// create task.
func (l *Ledger) TasksEnqueued(ctx context.Context, id string) error {
	if err := l.rdb.HSet(ctx, metaKey(id), "tasks", "all").Err(); err != nil {
		return fmt.Errorf("ledger: record the tasks of batch %s: %w", id, err)
	}
	return nil
}

// Figures are what a load records on its batch before registering its
// first row: the rows and total it registers (known only after the file
// was validated, while the batch exists from the start of its load) and
// its approval decision.
type Figures struct {
	Rows  int64
	Total money.Amount
	Info  []string
	// Hold is why the batch must await approval ("" : it goes at once);
	// Reserved: the day's sum was reserved for it (ReserveDaily). A load
	// that resumes the batch reuses both (Batch.Decided).
	Hold     string
	Reserved bool
	// Need, Role and Rule: the approval rule the batch is held under
	// (Batch.Need, NeedRole, Rule); Need 0 for none.
	Need int
	Role string
	Rule string
}

// SetBatchFigures records f on a batch, as its loader owner (the load
// lock's token): ErrLoadLockLost or errNotLoading as FinishLoad. The
// batch's scale is BeginBatch's, never changed.
func (l *Ledger) SetBatchFigures(ctx context.Context, id, owner string, f Figures) error {
	if owner == "" {
		return fmt.Errorf("ledger: record the figures of batch %s: no load lock owner: %w", id, ErrLoadLockLost)
	}
	args := []any{"rows", f.Rows, "total", f.Total.String(), "decided", 1, "hold", f.Hold, "rsv", boolField(f.Reserved),
		"aneed", f.Need, "arole", f.Role, "arule", f.Rule}
	if len(f.Info) > 0 {
		args = append(args, "info", strings.Join(f.Info, infoSep))
	}
	return l.loadStep(ctx, id, owner, "record the figures of batch", args...)
}

// dropEmptyScript deletes the metadata of a batch still loading that has
// no payout registered. KEYS: meta, counts, lk, audit. Replies 1 if dropped.
var dropEmptyScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'phase') ~= 'loading' then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('DEL', KEYS[1], KEYS[4])
return 1
`)

// DropEmptyBatch removes a batch begun by a load that was then refused,
// if it is still loading and has no payout: a refused file leaves no
// batch. It reports whether it removed it.
func (l *Ledger) DropEmptyBatch(ctx context.Context, id string) (bool, error) {
	n, err := dropEmptyScript.Run(ctx, l.rdb, []string{metaKey(id), countsKey(id), lineChunksKey(id), auditKey(id)}).Int()
	if err != nil {
		return false, fmt.Errorf("ledger: drop empty batch %s: %w", id, err)
	}
	if n == 0 {
		return false, nil
	}
	if err := l.rdb.ZRem(ctx, batchesKey(), id).Err(); err != nil {
		return true, fmt.Errorf("ledger: unindex batch %s: %w", id, err)
	}
	return true, nil
}

// MarkReported records that the final result file of a batch was written.
func (l *Ledger) MarkReported(ctx context.Context, id string) error {
	if err := l.rdb.HSet(ctx, metaKey(id), "reported", 1).Err(); err != nil {
		return fmt.Errorf("ledger: mark batch %s reported: %w", id, err)
	}
	return nil
}

// Batch returns one batch's metadata, or ErrNotFound.
func (l *Ledger) Batch(ctx context.Context, id string) (Batch, error) {
	m, err := l.rdb.HGetAll(ctx, metaKey(id)).Result()
	if err != nil {
		return Batch{}, fmt.Errorf("ledger: read batch %s: %w", id, err)
	}
	if len(m) == 0 {
		return Batch{}, fmt.Errorf("batch %s: %w", id, ErrNotFound)
	}
	return parseBatch(m), nil
}

// batchIDs lists batch ids, newest first.
func (l *Ledger) batchIDs(ctx context.Context) ([]string, error) {
	ids, err := l.rdb.ZRevRange(ctx, batchesKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: list batches: %w", err)
	}
	return ids, nil
}

// Counts are the rows and amounts of a batch per state.
type Counts struct {
	Rows  map[lifecycle.State]int64
	Units map[lifecycle.State]int64 // amounts in 10^-scale units
	// Awaiting and AwaitingUnits count the created payouts whose outcome
	// (paid or failed) the workers still follow: part of Rows[lifecycle.Created].
	Awaiting      int64
	AwaitingUnits int64
	// Watched and WatchedUnits count the paid payouts still under watch
	// (money may come back: returned): part of Rows[lifecycle.Paid].
	Watched      int64
	WatchedUnits int64
	// Checks counts the status checks answered and recorded for the
	// batch's payouts (Payout.Checks summed; payout history).
	Checks int64
}

// Amount returns the amount in state s.
func (c Counts) Amount(s lifecycle.State, scale int) money.Amount {
	return money.FromMinor(c.Units[s], scale)
}

// Total returns the number of rows in all states.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c.Rows {
		n += v
	}
	return n
}

// Open returns the number of rows for which an automatic step is still
// due: not in a final state, or created and awaiting their outcome.
func (c Counts) Open() int64 {
	n := c.Awaiting
	for _, s := range lifecycle.States {
		if s.Open() {
			n += c.Rows[s]
		}
	}
	return n
}

// counts returns the per-state counters of a batch (package view reads
// them for the product; the ledger's tests here).
func (l *Ledger) counts(ctx context.Context, id string) (Counts, error) {
	m, err := l.rdb.HGetAll(ctx, countsKey(id)).Result()
	if err != nil {
		return Counts{}, fmt.Errorf("ledger: read counts of %s: %w", id, err)
	}
	return parseCounts(m), nil
}

func parseBatch(m map[string]string) Batch {
	scale, _ := strconv.Atoi(m["scale"])
	total, err := money.ParseStored(m["total"])
	if err != nil {
		total = money.Zero
	}
	return Batch{
		ID: m["id"], File: m["file"], LoadedAt: msTime(m["loaded"]), Rows: atoi64(m["rows"]),
		Total: total, Scale: scale, Phase: m["phase"], Reported: m["reported"] == "1", TasksPending: m["tasks"] == "pending",
		Abandoned: m["abandoned"] == "1",
		LoadedBy:  m["by"], WaitReason: m["wait"], DecidedBy: m["dby"], DecidedAt: msTime(m["dat"]), Note: m["note"],
		FourEyes:    m["fe"] == "1",
		InfoColumns: splitInfo(m["info"]),
		Reading:     m["reading"], Policy: m["policy"],
		Decided: m["decided"] == "1", HoldReason: m["hold"], Reserved: m["rsv"] == "1",
		Need: int(atoi64(m["aneed"])), NeedRole: m["arole"], Rule: m["arule"], Approvers: parseApprovers(m),
		HeldAt: msTime(m["held"]), ExpiresAt: msTime(m["expat"]), Expiry: time.Duration(atoi64(m["expin"])) * time.Millisecond,
		ExpiredDiscard: m["expired"] == "1",
	}
}

func boolField(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func parseCounts(m map[string]string) Counts {
	c := Counts{Rows: map[lifecycle.State]int64{}, Units: map[lifecycle.State]int64{}}
	for _, s := range lifecycle.States {
		c.Rows[s] = atoi64(m["n:"+string(s)])
		c.Units[s] = atoi64(m["u:"+string(s)])
	}
	c.Awaiting, c.AwaitingUnits = atoi64(m["n:awaiting"]), atoi64(m["u:awaiting"])
	c.Watched, c.WatchedUnits = atoi64(m["n:watched"]), atoi64(m["u:watched"])
	c.Checks = atoi64(m["checks"])
	return c
}

func pairs(flat []string) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[flat[i]] = flat[i+1]
	}
	return m
}

// splitInfo is the list of informational column names stored as one
// field; nil for none.
func splitInfo(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, infoSep)
}
