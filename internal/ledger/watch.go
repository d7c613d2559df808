package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// The watch of paid payouts. Money can come back weeks after the PSP
// reported it sent (a bounce, a reversal, a refund, a chargeback), so a
// paid payout stays under a light watch for a window (decide.WatchPolicy,
// --watch-window, 30 days by default): its order's status is asked again
// at decaying intervals (1h, 6h, then daily), and a returned status moves
// it to returned. What the watch costs in Redis, per watched payout:
//
//	PREFIX:{B}:w          zset   one member (its externalId) scored by its next check (ms)
//	PREFIX:{B}:p:EXT      hash   fields watch (1 while watched), wseq, wdue, wend
//	PREFIX:{B}:counts     hash   n:watched, u:watched (per batch)
//	PREFIX:watching       zset   one member per batch, scored by its latest watch end
//
// and no task until a check is due: the workers' watch sweep (DueWatches)
// enqueues one task per due member. The member is removed when the window
// ends or the payout is returned; wend then keeps when its watch ended
// (the archive keeps it with the payout; a batch is archived only once no
// payout of it is watched).

// watchKey is the zset of a batch's watched payouts (keys.Watch).
func watchKey(batch string) string { return keys.Watch(batch) }

// watchingKey is the zset of the batches with watches (keys.Watching).
func watchingKey() string { return keys.Watching() }

// outcomeKeys are the keys of applyOutcomeScript.
func outcomeKeys(batch, ext string) []string {
	return []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), watchKey(batch)}
}

// WithWatch returns a copy of l that watches every payout it records paid
// under p (a zero Window: none is watched).
func (l *Ledger) WithWatch(p decide.WatchPolicy) *Ledger {
	c := *l
	c.watch = p
	return &c
}

// watchMargin is added to a batch's score in PREFIX:watching beyond the
// window of the payout about to be paid: the script's clock reads later
// than the snapshot's.
const watchMargin = time.Hour

// watchPaid returns the window and the first wait (ms) of the watch of a
// payout about to be recorded paid, after entering its batch in
// PREFIX:watching (ahead of the transition, so a crash between the two
// leaves a batch entered with nothing to watch, never a watch unseen).
func (l *Ledger) watchPaid(ctx context.Context, s decide.Snapshot) (window, first int64, err error) {
	if l.watch.Window <= 0 {
		return 0, 0, nil
	}
	end := s.Now.Add(l.watch.Window + watchMargin).UnixMilli()
	err = l.rdb.ZAddGT(ctx, watchingKey(), redis.Z{Score: float64(end), Member: s.Batch}).Err()
	if err != nil {
		return 0, 0, fmt.Errorf("ledger: enter batch %s for the watch: %w", s.Batch, err)
	}
	return l.watch.Window.Milliseconds(), l.watch.First().Milliseconds(), nil
}

// luaWatchPaid is the part of applyOutcomeScript that starts the watch of
// a payout it moves to paid: watchPaid(f, counts, watch, units, windowms,
// firstms, now) adds the watch's fields to f (the script's one HSET), the
// payout to the batch's watch zset and to the watched counters.
const luaWatchPaid = `
local function watchPaid(f, counts, wkey, units, windowms, firstms, now)
  if (tonumber(windowms) or 0) <= 0 then return end
  local due = string.format('%.0f', tonumber(now) + tonumber(firstms))
  push(f, 'watch', 1, 'wseq', 1, 'wdue', due, 'wend', string.format('%.0f', tonumber(now) + tonumber(windowms)))
  redis.call('ZADD', wkey, due, string.match(KEYS[1], ':p:(.*)$'))
  redis.call('HINCRBY', counts, 'n:watched', 1)
  redis.call('HINCRBY', counts, 'u:watched', units)
end
`

// Return is what the PSP said of a payout whose money came back.
type Return struct {
	Reason string // the PSP's reason, scrubbed
	At     string // when the PSP says it happened, as it wrote it, scrubbed ("": not said)
}

// parseWatch reads the watch of a stored payout.
func parseWatch(m map[string]string) decide.WatchState {
	seq, _ := strconv.Atoi(m["wseq"])
	return decide.WatchState{On: m["watch"] == "1" && lifecycle.State(m["state"]) == lifecycle.Paid,
		Seq: seq, Due: msTime(m["wdue"]), End: msTime(m["wend"])}
}

// parseReturn reads what the PSP said of a returned payout.
func parseReturn(m map[string]string) Return {
	return Return{Reason: m["rtreason"], At: m["rtat"]}
}

// watchArgs is applyWatchScript's ARGV in the order the script reads
// them (transition appends the actor and the operation id, luaReplay).
type watchArgs struct {
	Seq   int   // ARGV[1] the watch check answered, as read
	DueMS int64 // ARGV[2] its due time as read (ms)
	// ARGV[3] returned | again | ended (decide.WatchAction)
	Action decide.WatchAction
	Next   int    // ARGV[4] with again: the next check
	WaitMS int64  // ARGV[5] with again: from now until it is due
	Status string // ARGV[6] the PSP's status word ("": the stored one stays)
	Reason string // ARGV[7] the PSP's reason (returned)
	At     string // ARGV[8] when the PSP says it was returned
	HTTP   int    // ARGV[9] the answer, for the audit entry
	Error  string // ARGV[10] the error kept with returned
	// ARGV[11..13] the decision's reply, stored as the replay memo
	Head [3]string
}

func (a watchArgs) argv() []any {
	return []any{a.Seq, a.DueMS, string(a.Action), a.Next, a.WaitMS, a.Status, a.Reason, a.At, a.HTTP, a.Error,
		a.Head[0], a.Head[1], a.Head[2]}
}

// applyWatchScript writes what decide.Watch decided of a watch check's
// answer, if the payout is still as read: paid, watched, awaiting the same
// check with the same due time. Returned: paid -> returned (reason and
// time kept), the watch ends. Ended: the watch ends, the payout stays paid.
// Again: the next check is due WaitMS after now (Redis time).
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit    KEYS[4] watch
//	ARGV    watchArgs, then actor and op (luaReplay)
//
// Replies the decision's reply, {'changed', state, wseq} when the payout
// is not as read (nothing written), or {'nopayout', ...}.
var applyWatchScript = script(lifecycle.RoleWorker, luaReplay+applyWatchLua)

const applyWatchLua = `
local first, h = fetch(KEYS[1], 'state', 'watch', 'wseq', 'wdue', 'units')
if first then return first end
if not h[1] then return {'nopayout', '0', '0'} end
if h[1] ~= 'paid' or h[2] ~= '1' or num(h[3]) ~= tonumber(ARGV[1]) or num(h[4]) ~= tonumber(ARGV[2]) then
  return {'changed', h[1], tostring(num(h[3]))}
end
local act, units, now = ARGV[3], h[5], nowms()
local ext = string.match(KEYS[1], ':p:(.*)$')
local head = {ARGV[11], ARGV[12], ARGV[13]}
redis.call('HINCRBY', KEYS[1], 'checks', 1)
redis.call('HINCRBY', KEYS[2], 'checks', 1)
AUD.extra = {'wseq', ARGV[1], 'http', ARGV[9], 'psp', ARGV[6], 'note', ARGV[7]}
local f = {'updated', now}
if ARGV[6] ~= '' then push(f, 'pspstatus', ARGV[6]) end
if act == 'again' then
  local due = string.format('%.0f', tonumber(now) + tonumber(ARGV[5]))
  redis.call('ZADD', KEYS[4], due, ext)
  redis.call('HSET', KEYS[1], unpack(push(f, 'wseq', ARGV[4], 'wdue', due, decided(head))))
  return head
end
redis.call('ZREM', KEYS[4], ext)
redis.call('HINCRBY', KEYS[2], 'n:watched', -1)
redis.call('HINCRBY', KEYS[2], 'u:watched', '-' .. units)
push(f, 'watch', 0, 'wend', now)
if act == 'ended' then
  redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
  return head
end
push(f, 'state', 'returned', 'error', ARGV[10], 'rtreason', ARGV[7], 'rtat', ARGV[8], entered())
redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
move(KEYS[2], 'paid', 'returned', units)
return head
`

// WatchStep is what RecordWatch did.
type WatchStep struct {
	Action decide.WatchAction
	Seq    int           // with WatchAgain: the next check
	Wait   time.Duration // with WatchAgain: until it is due
	Error  string        // with WatchReturned: the error kept
}

// RecordWatch records the answer a to the watch check of the paid payout
// read as s (decide.Snapshot, before the PSP was asked), as decide.Watch
// decides under the ledger's watch policy, in one round trip: the write
// checks the payout is still as read. A payout that moved or was checked
// meanwhile gets WatchSkip: nothing is written, the other write stands.
func (l *Ledger) RecordWatch(ctx context.Context, s decide.Snapshot, a decide.WatchAnswer) (WatchStep, error) {
	d := decide.Watch(s, a, l.watch)
	if d.Action == decide.WatchSkip {
		return WatchStep{Action: decide.WatchSkip}, nil
	}
	step := WatchStep{Action: d.Action, Seq: d.Seq, Wait: d.Wait}
	head := [3]string{string(d.Action), strconv.Itoa(d.Seq), strconv.FormatInt(d.Wait.Milliseconds(), 10)}
	args := watchArgs{Seq: s.Watch.Seq, DueMS: unixMilli(s.Watch.Due), Action: d.Action, Next: d.Seq, WaitMS: d.Wait.Milliseconds(),
		Status: a.PSPStatus, HTTP: a.HTTP, Head: head}
	if d.Action == decide.WatchReturned {
		step.Error = ReturnNote(a.PSPStatus, a.Reason)
		args.Reason, args.At, args.Error = a.Reason, a.ChangedAt, step.Error
	}
	batch, ext := s.Batch, s.ExternalID
	res, err := replyOf(l.transitionKeys(ctx, applyWatchScript, outcomeKeys(batch, ext), args), batch, ext, "record watch", 3)
	if err != nil {
		return WatchStep{}, err
	}
	if res[0] == "changed" {
		return WatchStep{Action: decide.WatchSkip}, nil
	}
	if res[0] != head[0] || res[1] != head[1] || res[2] != head[2] {
		return WatchStep{}, fmt.Errorf("ledger: record watch of %s: reply %q, decided %q", ext, res, head)
	}
	return step, nil
}

// ReturnNote is the error a returned payout keeps: the PSP's status word
// and its reason.
func ReturnNote(status, reason string) string {
	note := "PSP status " + status + " after paid: the money came back"
	if reason != "" {
		note += ": " + reason
	}
	return note
}

// DueWatch is one watched payout whose check is due.
type DueWatch struct {
	Batch, ExternalID string
	Due               time.Time
}

// DueWatches returns up to limit watched payouts whose check is due on
// Redis's clock, earliest first per batch, and forgets the batches of
// PREFIX:watching whose every watch ended (compare-and-set on the batch's
// score: a batch a payout was just entered for stays). Its Redis work per
// call: a TIME, a ZRANGE of PREFIX:watching, and one ZRANGE per batch
// with watches.
func (l *Ledger) DueWatches(ctx context.Context, limit int) ([]DueWatch, error) {
	now, err := l.Time(ctx)
	if err != nil {
		return nil, err
	}
	nowms := now.UnixMilli()
	batches, err := l.rdb.ZRangeWithScores(ctx, watchingKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: batches with watches: %w", err)
	}
	var out []DueWatch
	for _, b := range batches {
		batch, _ := b.Member.(string)
		if len(out) >= limit {
			break
		}
		due, err := l.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: watchKey(batch), ByScore: true,
			Start: "-inf", Stop: strconv.FormatInt(nowms, 10), Count: int64(limit - len(out))}).Result()
		if err != nil {
			return nil, fmt.Errorf("ledger: due watches of %s: %w", batch, err)
		}
		for _, z := range due {
			ext, _ := z.Member.(string)
			out = append(out, DueWatch{Batch: batch, ExternalID: ext, Due: time.UnixMilli(int64(z.Score)).UTC()})
		}
		if len(due) == 0 && int64(b.Score) < nowms {
			if err := l.forgetWatching(ctx, batch, b.Score); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// forgetWatchingScript removes a batch from PREFIX:watching if its score
// is still the one read: the caller saw its watch zset empty after it read
// the score, and a payout paid since would have raised the score first
// (watchPaid).
//
//	KEYS[1] watching    ARGV[1] batch    ARGV[2] its score as read
var forgetWatchingScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
`)

// forgetWatching removes batch from PREFIX:watching if it has no watched
// payout and its score is still score (no payout was entered since it was
// read).
func (l *Ledger) forgetWatching(ctx context.Context, batch string, score float64) error {
	n, err := l.rdb.ZCard(ctx, watchKey(batch)).Result()
	if err != nil || n > 0 {
		return err
	}
	err = forgetWatchingScript.Run(ctx, l.rdb, []string{watchingKey()}, batch, strconv.FormatFloat(score, 'f', -1, 64)).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("ledger: forget batch %s of the watch: %w", batch, err)
	}
	return nil
}

// Watched returns how many paid payouts are under watch in all batches
// with watches (the metrics' gauge).
func (l *Ledger) Watched(ctx context.Context) (n int64, err error) {
	batches, err := l.rdb.ZRange(ctx, watchingKey(), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("ledger: batches with watches: %w", err)
	}
	for _, b := range batches {
		c, err := l.rdb.ZCard(ctx, watchKey(b)).Result()
		if err != nil {
			return 0, fmt.Errorf("ledger: watched payouts of %s: %w", b, err)
		}
		n += c
	}
	return n, nil
}
