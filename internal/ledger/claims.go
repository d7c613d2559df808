package ledger

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ClaimTaken is Claim that also tells which claims this call took:
// taken[i] reports whether ids[i] was unowned and now belongs to batch. An
// id batch owned already (an earlier run of the same content, or another
// loader of it running now) is neither taken nor in owners, which holds the
// ids owned by other batches, as Claim's result does.
func (l *Ledger) ClaimTaken(ctx context.Context, batch string, ids []string) (taken []bool, owners map[string]string, err error) {
	pipe := l.rdb.Pipeline()
	sets := make([]*redis.BoolCmd, len(ids))
	for i, id := range ids {
		sets[i] = pipe.SetNX(ctx, l.ownerKey(id), batch, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("ledger: claim externalIds: %w", err)
	}
	taken = make([]bool, len(ids))
	var lost, got []string
	for i, c := range sets {
		taken[i] = c.Val()
		if !taken[i] {
			lost = append(lost, ids[i])
		} else {
			got = append(got, ids[i])
		}
	}
	owners = map[string]string{}
	if len(lost) > 0 {
		if owners, err = l.Owners(ctx, batch, lost); err != nil {
			return nil, nil, err
		}
	}
	// An id taken just now may belong to an archived batch (its live key
	// is gone): give it back.
	arch := map[string]string{}
	if err := l.addArchivedOwners(ctx, batch, got, arch); err != nil {
		return nil, nil, err
	}
	if len(arch) > 0 {
		pipe := l.rdb.Pipeline()
		for i, id := range ids {
			if other, ok := arch[id]; ok && taken[i] {
				releaseScript.Eval(ctx, pipe, []string{l.ownerKey(id)}, batch)
				taken[i] = false
				owners[id] = other
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("ledger: give back archived externalIds: %w", err)
		}
	}
	if len(owners) == 0 {
		owners = nil
	}
	return taken, owners, nil
}

// ReleaseUnregistered drops batch's claims on those of ids that have no
// payout in batch, and returns how many claims it dropped. A registered
// payout keeps its claim whatever the caller believes: releasing it would
// let another file claim the id and pay it again.
//
// The existence check and the release cannot be one script: a claim
// (PREFIX:x:EXTID) and a payout (PREFIX:{BATCH}:p:EXTID) hash to different
// Redis Cluster slots. So the payouts are looked up first and only the
// claims of those not found are released, each with a compare-and-set on
// its owner. Nothing registers a payout of batch between the two steps as
// long as the caller holds the batch's load lock (LockLoad): registration
// happens only under it.
func (l *Ledger) ReleaseUnregistered(ctx context.Context, batch string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	pipe := l.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, l.payoutKey(batch, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("ledger: look up payouts of %s: %w", batch, err)
	}
	pipe = l.rdb.Pipeline()
	var dels []*redis.Cmd
	for i, id := range ids {
		if exists[i].Val() == 0 {
			dels = append(dels, releaseScript.Eval(ctx, pipe, []string{l.ownerKey(id)}, batch))
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
