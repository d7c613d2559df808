package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// Archiving (package archive) moves a final batch out of Redis into files
// and keeps only:
//
//	PREFIX:{B}:archived    hash   summary of an archived batch (ArchivedBatch)
//	PREFIX:xa:G:K          hash   the claims of its payouts, bucketed, until the id window ends (claimarchive.go)
//	PREFIX:batches         zset   the batch's entry, so status still lists it
//
// Every other key of the batch (meta, lines, counts, the payout hashes, the
// audit stream, loadlock) is deleted: the payouts first, in chunks, each
// chunk only if its payouts are unchanged since they were archived
// (DeleteArchivedPayouts), then the rest with meta last (DropBatch). A batch
// with both a summary and a meta hash is being archived: a re-run finishes
// it. The summary hash has no expiry: a few hundred bytes per batch.

// ErrArchived is matched, via errors.Is, by every *archivedError.
var ErrArchived = errors.New("ledger: batch archived")

// archivedError tells that a batch was archived: nothing of it can change
// any more (no payout resolved, cancelled, approved or discarded).
type archivedError struct{ Archived ArchivedBatch }

func (e *archivedError) Error() string {
	a := e.Archived
	return fmt.Sprintf("batch %s (%s) was archived at %s to %s: its payouts can no longer be resolved, cancelled, approved or discarded; the archive holds its result file and audit trail",
		a.ID, a.File, a.ArchivedAt.Format(time.RFC3339), a.Archive)
}

// Is makes errors.Is(err, ErrArchived) match.
func (e *archivedError) Is(target error) bool { return target == ErrArchived }

// ArchivedBatch is the summary kept in Redis for an archived batch.
type ArchivedBatch struct {
	Batch                // metadata as it was when archived (Phase: loaded or discarded)
	Counts     Counts    // rows and amounts per state when archived
	Archive    string    // path of NAME.archive.jsonl.gz
	Result     string    // path of the result file in the archive folder
	Audit      string    // path of the audit trail file ("" when the batch had none)
	ArchivedAt time.Time // Redis time the summary was first written
	LastChange time.Time // last change of the batch (Redis time) when it was archived
	ClaimsTill time.Time // the batch's externalId claims expire then (ArchivedAt + id window)
}

// AsBatch returns the batch metadata in phase PhaseArchived.
func (a ArchivedBatch) AsBatch() Batch {
	b := a.Batch
	b.Phase = lifecycle.PhaseArchived
	return b
}

// Archive is the ledger's side of archiving a final batch (package
// archive): the summary an archived batch leaves in Redis, the refusal of
// changes to an archived batch, and the deletion of its keys once its
// files are written.
type Archive struct{ l *Ledger }

// Archive returns the ledger's archiving.
func (l *Ledger) Archive() Archive { return Archive{l} }

// SaveArchived writes (or rewrites) the summary of an archived batch.
func (ar Archive) SaveArchived(ctx context.Context, a ArchivedBatch) error {
	f := []any{
		"id", a.ID, "file", a.File, "loaded", a.LoadedAt.UnixMilli(), "rows", a.Rows, "total", a.Total.String(),
		"scale", a.Scale, "phase", a.Phase, "by", a.LoadedBy, "dby", a.DecidedBy, "dat", a.DecidedAt.UnixMilli(),
		"archive", a.Archive, "result", a.Result, "audit", a.Audit,
		"archivedAt", a.ArchivedAt.UnixMilli(), "lastChange", a.LastChange.UnixMilli(), "claimsTill", a.ClaimsTill.UnixMilli(),
		"n:awaiting", a.Counts.Awaiting, "u:awaiting", a.Counts.AwaitingUnits, "checks", a.Counts.Checks,
	}
	for _, s := range lifecycle.States {
		f = append(f, "n:"+string(s), a.Counts.Rows[s], "u:"+string(s), a.Counts.Units[s])
	}
	if err := ar.l.rdb.HSet(ctx, archivedKey(a.ID), f...).Err(); err != nil {
		return fmt.Errorf("ledger: save archive summary of %s: %w", a.ID, err)
	}
	return nil
}

// Archived returns the summary of an archived batch (or of one being
// archived: its meta may still exist), or ErrNotFound.
func (ar Archive) Archived(ctx context.Context, id string) (ArchivedBatch, error) {
	m, err := ar.l.rdb.HGetAll(ctx, archivedKey(id)).Result()
	if err != nil {
		return ArchivedBatch{}, fmt.Errorf("ledger: read archive summary of %s: %w", id, err)
	}
	if len(m) == 0 {
		return ArchivedBatch{}, fmt.Errorf("archived batch %s: %w", id, ErrNotFound)
	}
	return parseArchived(m), nil
}

// ArchivedBatches returns the summaries of every archived batch (including
// those still being archived), newest first, in two round trips.
func (ar Archive) ArchivedBatches(ctx context.Context) ([]ArchivedBatch, error) {
	ids, err := ar.l.batchIDs(ctx)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	pipe := ar.l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, archivedKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ledger: read archive summaries: %w", err)
	}
	var out []ArchivedBatch
	for _, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, parseArchived(m))
		}
	}
	return out, nil
}

func parseArchived(m map[string]string) ArchivedBatch {
	return ArchivedBatch{
		Batch: parseBatch(m), Counts: parseCounts(m),
		Archive: m["archive"], Result: m["result"], Audit: m["audit"],
		ArchivedAt: msTime(m["archivedAt"]), LastChange: msTime(m["lastChange"]), ClaimsTill: msTime(m["claimsTill"]),
	}
}

// CheckNotArchived returns an *archivedError when batch has an archive
// summary (archived, or being archived), nil when it has none.
func (ar Archive) CheckNotArchived(ctx context.Context, batch string) error {
	a, err := ar.Archived(ctx, batch)
	switch {
	case err == nil:
		return &archivedError{Archived: a}
	case errors.Is(err, ErrNotFound):
		return nil
	}
	return err
}

// PayoutFromFields reads a payout from its stored fields (package view's
// pages and EachRaw, or an archive's).
func PayoutFromFields(batch string, fields map[string]string) Payout {
	return parsePayout(batch, fields)
}

func cutDash(id string) (int64, string, bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			n, err := strconv.ParseInt(id[:i], 10, 64)
			return n, id[i+1:], err == nil
		}
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, "", err == nil
}

// Fingerprint is what DeleteArchivedPayouts compares before it deletes a
// payout: the fields every transition changes.
type Fingerprint struct {
	ExternalID                         string
	State, Updated, Creates, Seq, OSeq string
}

// FingerprintOf returns the fingerprint of stored payout fields.
func FingerprintOf(ext string, f map[string]string) Fingerprint {
	return Fingerprint{ExternalID: ext, State: f["state"], Updated: f["updated"], Creates: f["creates"], Seq: f["seq"], OSeq: f["oseq"]}
}

// deleteArchivedScript deletes the payouts of a chunk if each one is gone
// already or still has its archived fingerprint; otherwise it deletes
// nothing and replies {0, i} for the first payout that changed.
// KEYS: payouts; ARGV: state, updated, creates, seq, oseq per key.
var deleteArchivedScript = redis.NewScript(`
for i, k in ipairs(KEYS) do
  local h = redis.call('HMGET', k, 'state', 'updated', 'creates', 'seq', 'oseq')
  if h[1] then
    local b = (i - 1) * 5
    for j = 1, 5 do
      if (h[j] or '') ~= ARGV[b + j] then return {0, i} end
    end
  end
end
local n = 0
for _, k in ipairs(KEYS) do n = n + redis.call('DEL', k) end
return {1, n}
`)

// ChangedError tells that a payout changed after it was archived: its
// hash (and the rest of the batch) was left in Redis.
type ChangedError struct{ Batch, ExternalID string }

func (e *ChangedError) Error() string {
	return fmt.Sprintf("ledger: payout %s of batch %s changed after it was archived; it was not deleted (run the archive again: it rewrites the archive)", e.ExternalID, e.Batch)
}

// DeleteArchivedPayouts deletes the payout hashes of batch in chunks of
// chunk, each chunk in one script call and only if none of its payouts
// changed since fp was taken (a *ChangedError otherwise). after, if not
// nil, runs after each chunk. It returns how many hashes it deleted.
func (ar Archive) DeleteArchivedPayouts(ctx context.Context, batch string, fp []Fingerprint, chunk int, after func(deleted int) error) (int, error) {
	if chunk <= 0 {
		chunk = 500
	}
	n := 0
	for start := 0; start < len(fp); start += chunk {
		part := fp[start:min(start+chunk, len(fp))]
		keys := make([]string, len(part))
		args := make([]any, 0, 5*len(part))
		for i, f := range part {
			keys[i] = payoutKey(batch, f.ExternalID)
			args = append(args, f.State, f.Updated, f.Creates, f.Seq, f.OSeq)
		}
		res, err := deleteArchivedScript.Run(ctx, ar.l.rdb, keys, args...).Int64Slice()
		if err != nil {
			return n, fmt.Errorf("ledger: delete archived payouts of %s: %w", batch, err)
		}
		if res[0] == 0 {
			return n, &ChangedError{Batch: batch, ExternalID: part[res[1]-1].ExternalID}
		}
		n += int(res[1])
		if after != nil {
			if err := after(n); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// batchKeys returns the keys of a batch other than its payout hashes, the
// chunks of its line index and its archive summary (its index per state
// included), meta last: the order
// DropBatch deletes them in.
func (ar Archive) batchKeys(batch string) []string {
	keys := []string{linesKey(batch), lineChunksKey(batch), countsKey(batch), auditKey(batch), loadLockKey(batch), keys.Events(batch), watchKey(batch)}
	for _, st := range lifecycle.States {
		if st != lifecycle.Queued {
			keys = append(keys, stateIndexKey(batch, st))
		}
	}
	return append(keys, metaKey(batch))
}

// DropBatch deletes the chunks of the line index, then the keys of
// batchKeys in one command (they share the batch's slot). Call it after
// DeleteArchivedPayouts: without its line index a batch's remaining
// payout hashes can no longer be found.
func (ar Archive) DropBatch(ctx context.Context, batch string) error {
	chunks, err := ar.l.lineChunks(ctx, batch)
	if err != nil {
		return err
	}
	for start := 0; start < len(chunks); start += eachChunk {
		keys := make([]string, 0, eachChunk)
		for _, c := range chunks[start:min(start+eachChunk, len(chunks))] {
			keys = append(keys, lineChunkKey(batch, c))
		}
		if err := ar.l.rdb.Del(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("ledger: drop line index of %s: %w", batch, err)
		}
	}
	if err := ar.l.rdb.Del(ctx, ar.batchKeys(batch)...).Err(); err != nil {
		return fmt.Errorf("ledger: drop keys of %s: %w", batch, err)
	}
	return nil
}

// BatchFromFields reads batch metadata from its stored fields (a meta
// hash, or an archive's header).
func BatchFromFields(m map[string]string) Batch { return parseBatch(m) }

// CountsFromFields reads per-state counters from their stored fields.
func CountsFromFields(m map[string]string) Counts { return parseCounts(m) }
