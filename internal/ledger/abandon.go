package ledger

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/scrub"

	"github.com/redis/go-redis/v9"
)

// ErrLoadRunning is returned when the batch is loading and its loader holds the load lock
// now: it is not interrupted, so it cannot be discarded.
var ErrLoadRunning = errors.New("ledger: a loader is loading the batch now")

// Discarded is what DiscardBatch did.
type Discarded struct {
	Phase     string // the phase the batch was in (loading: an interrupted load abandoned)
	Cancelled int    // payouts moved from queued to cancelled
	Released  int    // externalId claims released (an abandoned load only)
}

// discardLoadScript abandons a batch whose load was interrupted: loading
// -> discarded, recording who, when and why. KEYS: meta, audit; ARGV: by,
// note, the role by acted in (WithRole; "" none). Replies 1 when it moved the batch.
var discardLoadScript = script(lifecycle.RolePerson, `
if redis.call('HGET', KEYS[1], 'phase') ~= 'loading' then return 0 end
local now = nowms()
redis.call('HSET', KEYS[1], 'phase', 'discarded', 'abandoned', 1, 'dby', ARGV[1], 'dat', now, 'note', ARGV[2])
redis.call('XADD', KEYS[2], '*', 't', now, 'actor', ARGV[1], 'ext', '', 'from', 'loading', 'to', 'discarded', 'note', ARGV[2], unpack(roleField(ARGV[3])))
return 1
`)

// DiscardBatch refuses a batch that awaits approval (as Discard), or
// abandons one whose load was interrupted: its phase becomes discarded,
// every payout it registered (all queued: no create is ever sent for a
// batch that is not loaded) becomes cancelled, and every externalId claim
// it holds is released, so that a corrected file with those ids loads. A
// batch whose loader is at work now is refused (ErrLoadRunning); the
// discard holds the load lock meanwhile, so no loader resumes it. A rerun
// after a crash goes on cancelling and releasing.
func (l *Ledger) DiscardBatch(ctx context.Context, id, by, note string) (Discarded, error) {
	if by == "" || note == "" {
		return Discarded{}, fmt.Errorf("discard %s: operator name and note are required: %w", id, ErrBadResolution)
	}
	by, note, err := typedNote(by, note, scrub.MaxNote)
	if err != nil {
		return Discarded{}, fmt.Errorf("discard %s: %w", id, err)
	}
	b, err := l.Batch(ctx, id)
	if err != nil {
		return Discarded{}, err
	}
	if b.Phase != lifecycle.PhaseLoading && !(b.Phase == lifecycle.PhaseDiscarded && b.Abandoned) {
		n, err := l.Controls().Discard(ctx, id, by, note)
		return Discarded{Phase: b.Phase, Cancelled: n}, err
	}
	res := Discarded{Phase: lifecycle.PhaseLoading}
	owner := "discard:" + rand.Text()
	locked, err := l.Locks().LockLoad(ctx, id, owner, 10*time.Minute)
	if err != nil {
		return res, err
	}
	if !locked {
		return res, fmt.Errorf("batch %s: %w (wait for it, or for its lease to expire if it died)", id, ErrLoadRunning)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Locks().UnlockLoad(uctx, id, owner)
	}()
	if b.Phase == lifecycle.PhaseLoading {
		if err := discardLoadScript.Run(ctx, l.rdb, []string{metaKey(id), auditKey(id)}, by, note, roleOf(ctx)).Err(); err != nil {
			return res, fmt.Errorf("ledger: discard %s: %w", id, err)
		}
	}
	if res.Cancelled, err = l.cancelQueued(ctx, id, by, "interrupted load discarded: "+note); err != nil {
		return res, err
	}
	res.Released, err = l.releaseClaimsOf(ctx, id)
	return res, err
}

// cancelQueued cancels every queued or scheduled payout of a batch.
func (l *Ledger) cancelQueued(ctx context.Context, id, by, note string) (int, error) {
	return l.cancelQueuedAs(ctx, id, cancelScript, by, note)
}

// cancelQueuedAs is cancelQueued with the cancel script of a role
// (cancelScript: a person; cancelExpiredScript: the reconciler).
func (l *Ledger) cancelQueuedAs(ctx context.Context, id string, s *redis.Script, by, note string) (int, error) {
	var ids []string
	if err := l.EachOpen(ctx, id, func(p OpenPayout) error {
		if p.State == lifecycle.Queued || p.State == lifecycle.Scheduled {
			ids = append(ids, p.ExternalID)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	held, err := l.rdb.ZRange(ctx, stateIndexKey(id, lifecycle.Held), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("ledger: held payouts of %s: %w", id, err)
	}
	ids = append(ids, held...)
	n := 0
	for _, ext := range ids {
		found, err := l.cancelWith(ctx, s, id, ext, by, note)
		if errors.Is(err, ErrEverSent) {
			continue // sent before: not cancelled as never sent
		}
		if err != nil {
			return n, err
		}
		if found == lifecycle.Queued || found == lifecycle.Held || found == lifecycle.Scheduled {
			n++
		}
	}
	return n, nil
}

// releaseClaimsOf releases every live externalId claim batch holds whose
// payout does not exist or is cancelled (never one of a payout that may
// have been sent). A claim is stored under its id's folded form
// (extid.Key) while a payout is stored under the id as written: the
// batch's payouts that are not cancelled are read first, by their folded
// form. It scans the claim keys: a rare operator action.
func (l *Ledger) releaseClaimsOf(ctx context.Context, batch string) (int, error) {
	keep := map[string]bool{}
	if err := l.each(ctx, batch, func(p Payout) error {
		if p.State != lifecycle.Cancelled {
			keep[extid.Key(p.ExternalID)] = true
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("ledger: read the payouts of %s: %w", batch, err)
	}
	var (
		mu       sync.Mutex
		released int
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, ownerKey("*"), 1000).Iterator()
		var keys []string
		flush := func() error {
			n, err := l.releaseIfAbandoned(ctx, batch, keys, keep)
			mu.Lock()
			released += n
			mu.Unlock()
			keys = keys[:0]
			return err
		}
		for it.Next(ctx) {
			keys = append(keys, it.Val())
			if len(keys) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("ledger: scan the claims: %w", err)
		}
		return flush()
	}
	var err error
	switch c := l.rdb.(type) {
	case *redis.Client:
		err = scan(ctx, c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	default:
		err = fmt.Errorf("ledger: release the claims of %s: unsupported Redis client %T", batch, l.rdb)
	}
	return released, err
}

// releaseIfAbandoned releases those of the claim keys that batch holds
// whose folded form is not in keep (the batch's payouts that are not
// cancelled).
func (l *Ledger) releaseIfAbandoned(ctx context.Context, batch string, keys []string, keep map[string]bool) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	pipe := l.rdb.Pipeline()
	owners := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		owners[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("ledger: read claims: %w", err)
	}
	pipe = l.rdb.Pipeline()
	var dels []*redis.Cmd
	for i, c := range owners {
		if form := keys[i][len(ownerKey("")):]; c.Val() == batch && !keep[form] {
			dels = append(dels, releaseScript.Eval(ctx, pipe, []string{ownerKey(form)}, batch))
		}
	}
	if len(dels) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("ledger: release externalIds of %s: %w", batch, err)
	}
	n := 0
	for _, c := range dels {
		if v, _ := c.Int(); v == 1 {
			n++
		}
	}
	return n, nil
}
