package ledger

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/extid"
	"github.com/redis/go-redis/v9"
)

// Look-alike externalIds are one id (package extid): PO-Case-3 and
// po-case-3, or PO-café-2 composed and decomposed. A claim, live or
// archived, is therefore stored under the id's extid.Key, and a second
// spelling meets the first's claim. The payout itself keeps the id as
// written (its key, the PSP request).
//
// Claims written before ids were folded are under the id as written. So
// that such an id still collides with itself as written, every lookup also
// reads the as-written form when it differs from the key (claimForms), and
// a release or an archiving drops both. A look-alike of such a legacy
// claim (po-case-3 against a legacy PO-Case-3) is not found: that would
// need the legacy spelling. Legacy claims end with their batch's archiving
// (moved under the key) plus the id window; once no claim from before the
// change can remain, the second read can go.

// Claims is the registry of externalId claims: every externalId belongs
// to one batch, through a live claim while the batch is in Redis and an
// archived one (claimarchive.go) for the id window after it is archived.
// A load claims its ids, gives back those it did not register, and the
// archiver moves a batch's claims into the archived buckets and sweeps
// the expired ones.
type Claims struct{ l *Ledger }

// Claims returns the ledger's externalId claim registry.
func (l *Ledger) Claims() Claims { return Claims{l} }

// claimForms returns the forms under which a claim on ext may be stored:
// its key first, then ext as written if that differs (a legacy claim).
func claimForms(ext string) []string {
	k := extid.Key(ext)
	if k == ext {
		return []string{k}
	}
	return []string{k, ext}
}

// releaseForms queues the compare-and-delete on batch of every form of the
// claim on id.
func releaseForms(ctx context.Context, pipe redis.Pipeliner, batch, id string) []*redis.Cmd {
	forms := claimForms(id)
	cmds := make([]*redis.Cmd, len(forms))
	for i, f := range forms {
		cmds[i] = releaseScript.Eval(ctx, pipe, []string{ownerKey(f)}, batch)
	}
	return cmds
}

// Owners returns, for each externalId that some batch other than batch
// already owns (a live claim, or an archived batch's claim within the id
// window), that batch. It writes nothing (validation, dry runs).
func (cl Claims) Owners(ctx context.Context, batch string, ids []string) (map[string]string, error) {
	live, err := cl.liveOwners(ctx, batch, ids)
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
	return owned, cl.addArchivedOwners(ctx, batch, check, owned)
}

// addArchivedOwners adds to owned the archived owners other than batch of
// ids.
func (cl Claims) addArchivedOwners(ctx context.Context, batch string, ids []string, owned map[string]string) error {
	arch, err := cl.archivedOwners(ctx, ids)
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
func (cl Claims) Claim(ctx context.Context, batch string, ids []string) (map[string]string, error) {
	_, owners, err := cl.ClaimTaken(ctx, batch, ids)
	return owners, err
}

// release drops batch's claims on ids (used to undo a refused load).
func (cl Claims) release(ctx context.Context, batch string, ids []string) error {
	pipe := cl.l.rdb.Pipeline()
	for _, id := range ids {
		releaseForms(ctx, pipe, batch, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("ledger: release externalIds: %w", err)
	}
	return nil
}

// ClaimTaken is Claim that also tells which claims this call took:
// taken[i] reports whether ids[i] was unowned and now belongs to batch. An
// id batch owned already (an earlier run of the same content, or another
// loader of it running now) is neither taken nor in owners, which holds the
// ids owned by other batches, as Claim's result does.
//
// Every id whose live key batch holds afterwards, taken now or earlier, is
// checked against the archived claims: an earlier run may have taken the
// live key and died before its own check or give-back. An id an archived
// batch claims is given back (compare-and-delete on batch) and reported.
func (cl Claims) ClaimTaken(ctx context.Context, batch string, ids []string) (taken []bool, owners map[string]string, err error) {
	taken, live, legacy, err := cl.claimLive(ctx, batch, ids)
	if err != nil {
		return nil, nil, err
	}
	owners = map[string]string{}
	// Batch's live key gives way to another batch's legacy or archived
	// claim on the id.
	giveBack := map[string]string{} // id -> the other batch that owns it
	var mine []string
	for i, v := range live {
		switch {
		case v != batch:
			owners[ids[i]] = v
		case legacy[i] != "" && legacy[i] != batch:
			giveBack[ids[i]] = legacy[i]
			mine = append(mine, ids[i])
		default:
			mine = append(mine, ids[i])
		}
	}
	if err := cl.addArchivedOwners(ctx, batch, mine, giveBack); err != nil {
		return nil, nil, err
	}
	if len(giveBack) > 0 {
		pipe := cl.l.rdb.Pipeline()
		for i, id := range ids {
			if other, ok := giveBack[id]; ok {
				releaseScript.Eval(ctx, pipe, []string{ownerKey(extid.Key(id))}, batch)
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

// claimRounds bounds how often claimLive tries again an id whose live key
// vanished between its SETNX and its GET.
const claimRounds = 5

// claimLive SETNXes the live key of each id (its extid.Key) and returns
// whether this call took it and the owner of each live key afterwards. A
// key that vanished between the SETNX and the reading of its owner is
// claimed again, never assumed to be batch's.
//
// legacy[i] is the owner of the legacy claim on ids[i] (claimForms), read
// in the round trip of the SETNX that took the live key, right after it;
// for an id it did not take, live[i] already weighs the legacy claim
// (liveOwners reads every form) and legacy[i] is empty.
func (cl Claims) claimLive(ctx context.Context, batch string, ids []string) (taken []bool, live, legacy []string, err error) {
	taken = make([]bool, len(ids))
	live = make([]string, len(ids))
	legacy = make([]string, len(ids))
	todo := make([]int, len(ids))
	for i := range ids {
		todo[i] = i
	}
	for round := 0; len(todo) > 0; round++ {
		if round == claimRounds {
			return nil, nil, nil, fmt.Errorf("ledger: claim externalIds: %d live keys vanished %d times in a row", len(todo), claimRounds)
		}
		lost, err := cl.setLive(ctx, batch, ids, todo, taken, live, legacy)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(lost) == 0 {
			break
		}
		lostIDs := make([]string, len(lost))
		for j, i := range lost {
			lostIDs[j] = ids[i]
		}
		got, err := cl.liveOwners(ctx, batch, lostIDs)
		if err != nil {
			return nil, nil, nil, err
		}
		todo = todo[:0]
		for j, i := range lost {
			if got[j] == "" {
				todo = append(todo, i)
			} else {
				live[i] = got[j]
			}
		}
	}
	return taken, live, legacy, nil
}

// setLive is one round of claimLive: one pipeline of, per id of ids[todo],
// the SETNX of its live key followed by the GET of its legacy form if it
// has one. It records the ids taken in taken, live and legacy, and returns
// the indexes of those not taken.
func (cl Claims) setLive(ctx context.Context, batch string, ids []string, todo []int, taken []bool, live, legacy []string) ([]int, error) {
	pipe := cl.l.rdb.Pipeline()
	sets := make([]*redis.BoolCmd, len(todo))
	olds := make([]*redis.StringCmd, len(todo))
	for j, i := range todo {
		forms := claimForms(ids[i])
		sets[j] = pipe.SetNX(ctx, ownerKey(forms[0]), batch, 0)
		if len(forms) > 1 {
			olds[j] = pipe.Get(ctx, ownerKey(forms[1]))
		}
	}
	if err := execLookups(ctx, pipe); err != nil {
		return nil, fmt.Errorf("ledger: claim externalIds: %w", err)
	}
	var lost []int
	for j, i := range todo {
		if !sets[j].Val() {
			lost = append(lost, i)
			continue
		}
		taken[i], live[i] = true, batch
		if olds[j] != nil {
			legacy[i] = olds[j].Val()
		}
	}
	return lost, nil
}

// ReleaseUnregistered drops batch's claims on those of ids that have no
// payout in batch, and returns how many claims it dropped. Spellings of
// one id (one extid.Key) among ids are judged together: their claim is
// dropped only if the batch has a payout under none of them. A registered
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
func (cl Claims) ReleaseUnregistered(ctx context.Context, batch string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	pipe := cl.l.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, payoutKey(batch, id))
	}
	// The payouts are keyed by the id as written, the claims by its key
	// (and, legacy, as written): the release drops both.
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("ledger: look up payouts of %s: %w", batch, err)
	}
	registered := map[string]bool{}
	for i, id := range ids {
		if exists[i].Val() != 0 {
			registered[extid.Key(id)] = true
		}
	}
	pipe = cl.l.rdb.Pipeline()
	var dels [][]*redis.Cmd
	for _, id := range ids {
		if !registered[extid.Key(id)] {
			dels = append(dels, releaseForms(ctx, pipe, batch, id))
		}
	}
	if len(dels) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("ledger: release externalIds of %s: %w", batch, err)
	}
	n := 0
	for _, forms := range dels {
		for _, c := range forms {
			if v, _ := c.Int(); v == 1 {
				n++
				break
			}
		}
	}
	return n, nil
}
