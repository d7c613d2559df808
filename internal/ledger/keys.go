package ledger

import (
	"hash/fnv"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
)

// The ledger's names for the Redis keys it writes, each the builder of
// package keys (internal/ledger/keys), which builds every key of payout's
// own; the read side (package view) names them through it too. Other
// packages read and write the workers' shared keys through the ledger's
// methods (shared.go), never by key. The layout: docs/design.md.

// lineChunk is how many file lines one line-index key covers
// (keys.LineChunk).
const lineChunk = keys.LineChunk

func metaKey(batch string) string               { return keys.Meta(batch) }
func linesKey(batch string) string              { return keys.Lines(batch) }
func lineChunksKey(batch string) string         { return keys.LineChunks(batch) }
func lineChunkKey(batch string, k int64) string { return keys.LineChunkOf(batch, k) }
func stateIndexKey(batch string, st lifecycle.State) string {
	return keys.StateIndex(batch, string(st))
}
func countsKey(batch string) string      { return keys.Counts(batch) }
func payoutKey(batch, ext string) string { return keys.Payout(batch, ext) }
func loadLockKey(batch string) string    { return keys.LoadLock(batch) }
func auditKey(batch string) string       { return keys.Audit(batch) }
func dueOfKey(batch string) string       { return keys.DueOf(batch) }
func dueKey() string                     { return keys.Due() }
func archivedKey(batch string) string    { return keys.Archived(batch) }
func ownerKey(form string) string        { return keys.Owner(form) }
func batchesKey() string                 { return keys.Batches() }
func globalAuditKey() string             { return keys.GlobalAudit() }
func claimGensKey() string               { return keys.ClaimGens() }
func dailyKey(now time.Time) string      { return keys.Daily(now) }
func leaseKey(name string) string        { return keys.Lease(name) }
func rollbackKey() string                { return keys.Rollback() }

// claimBucketKey is the bucket of generation gen that holds the archived
// claim on an externalId in claim form form (field form): FNV-1a of form
// modulo the generation's bucket count.
func claimBucketKey(gen int, form string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(form))
	return claimBucketKeyAt(gen, h.Sum32()%claimBucketCount(gen))
}

// claimBucketCount is the number of buckets of generation gen.
func claimBucketCount(gen int) uint32 { return uint32(claimBuckets0) << gen }

// claimBucketKeyAt is bucket k of generation gen.
func claimBucketKeyAt(gen int, k uint32) string { return keys.ClaimBucket(gen, k) }
