package ledger

import (
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/extid"
)

// The ledger owns the Redis keys of payout (Asynq's are Asynq's), and this
// file builds every one of them: the unexported builders for the ledger's
// own use, the exported ones for tests and for tools that name the kind of
// a key. Other packages read and write the workers' shared keys through
// the ledger's methods (shared.go), never by key.
// Code outside the ledger, tests included, gets a key from these
// functions, never builds one (keys_test.go checks it). The layout:
// docs/design.md.

// prefix begins every key of payout's own.
const prefix = "payout"

// tag is the common part of the keys of a batch: its hash tag {BATCH}
// puts them all in one Redis Cluster slot.
func tag(batch string) string { return prefix + ":{" + batch + "}" }

// metaKey is the hash of a batch's metadata (phase, file, total...).
func metaKey(batch string) string { return tag(batch) + ":meta" }

// linesKey is the single line index of the batches registered before the
// index was chunked: read, no longer written.
func linesKey(batch string) string { return tag(batch) + ":lines" }

// lineChunk is how many file lines one line-index key covers: at most
// zset-max-listpack-entries (128 by default), so each stays a listpack.
const lineChunk = 128

// lineChunksKey is the zset of the chunk numbers of a batch's line index.
func lineChunksKey(batch string) string { return tag(batch) + ":lk" }

// lineChunkKey is chunk k of a batch's line index: the externalIds of
// file lines 128k..128k+127, scored by line.
func lineChunkKey(batch string, k int64) string {
	return tag(batch) + ":l:" + strconv.FormatInt(k, 10)
}

// stateIndexKey is the zset of the externalIds of a batch's payouts in
// state st (any state but queued), scored by line: the console's index
// per state (query.go), kept by the transition scripts' move().
func stateIndexKey(batch string, st State) string { return tag(batch) + ":s:" + string(st) }

// countsKey is the hash of a batch's rows and minor units per state.
func countsKey(batch string) string { return tag(batch) + ":counts" }

// payoutKey is the hash of one payout.
func payoutKey(batch, ext string) string { return tag(batch) + ":p:" + ext }

// loadLockKey is the lock a loader holds while it registers a batch.
func loadLockKey(batch string) string { return tag(batch) + ":loadlock" }

// auditKey is a batch's audit stream.
func auditKey(batch string) string { return tag(batch) + ":audit" }

// archivedKey is the summary of a batch moved into an archive file.
func archivedKey(batch string) string { return tag(batch) + ":archived" }

// ownerKey is the live claim on an externalId, given in one of its claim
// forms (claimForms; normally its extid.Key): the batch that owns it.
func ownerKey(form string) string { return prefix + ":x:" + form }

// batchesKey is the zset of batch ids scored by load time.
func batchesKey() string { return prefix + ":batches" }

// globalAuditKey holds the operator actions that concern no batch
// (pause, resume of the queue).
func globalAuditKey() string { return prefix + ":audit" }

// claimGensKey holds, per generation of archived claims, the claims
// written and the last day of its claims.
func claimGensKey() string { return prefix + ":xa:gens" }

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
func claimBucketKeyAt(gen int, k uint32) string {
	return prefix + ":xa:" + strconv.Itoa(gen) + ":" + strconv.FormatUint(uint64(k), 10)
}

// dailyKey is the sum of the amounts loaded on the UTC day of now.
func dailyKey(now time.Time) string { return prefix + ":daily:" + now.UTC().Format("2006-01-02") }

// leaseKey is the lease of periodic work named name.
func leaseKey(name string) string { return prefix + ":lease:" + name }

// rateLimitKey is the PSP request rate limit shared by every worker
// (redis_rate adds its own prefix "rate:").
func rateLimitKey() string { return prefix + ":ratelimit:psp" }

// lookupSampleKey holds the externalId of a payout the PSP created: the
// subject of the workers' check that the PSP finds orders by externalId.
func lookupSampleKey() string { return prefix + ":psp:lookup-sample" }

// lookupVerifiedKey exists once that check succeeded.
func lookupVerifiedKey() string { return prefix + ":psp:lookup-verified" }

// rollbackKey holds, once a worker found the ledger gone back in time,
// what it found: no worker creates while it exists (epoch.go).
func rollbackKey() string { return prefix + ":rollback" }

// dataKeyKey is the hash of the data key the loader seals card numbers
// with: its id and fingerprint (never the key), and when it was recorded.
func dataKeyKey() string { return prefix + ":datakey" }

// authFaultsKey is the zset of the workers (actor) whose credentials the
// PSP refused on a recheck, scored by when (Redis time, ms).
func authFaultsKey() string { return prefix + ":psp:authfaults" }

// metricsSnapshotKey holds the on-call gauges one worker computed from the
// ledger (internal/metrics), for every worker to export.
func metricsSnapshotKey() string { return prefix + ":metrics:snapshot" }

// MetricsSnapshotKey is the key of the on-call gauges' snapshot
// (internal/metrics stores and reads it).
func MetricsSnapshotKey() string { return metricsSnapshotKey() }

// RateLimitKey is the key of the PSP request rate limit every worker
// shares (internal/worker's gate).
func RateLimitKey() string { return rateLimitKey() }

// LookupSampleKey is the key of the subject of the workers' check that
// the PSP finds orders by externalId (internal/worker's lookupCheck).
func LookupSampleKey() string { return lookupSampleKey() }

// LookupVerifiedKey is the key that exists once that check succeeded
// (internal/worker's lookupCheck).
func LookupVerifiedKey() string { return lookupVerifiedKey() }

// PayoutKey is the hash of one payout.
func PayoutKey(batch, externalID string) string { return payoutKey(batch, externalID) }

// MetaKey is the hash of a batch's metadata (phase, file, total...).
func MetaKey(batch string) string { return metaKey(batch) }

// StateIndexKey is the zset of a batch's payouts in state st (any state
// but queued), scored by line.
func StateIndexKey(batch string, st State) string { return stateIndexKey(batch, st) }

// CountsKey is the hash of a batch's counters per state.
func CountsKey(batch string) string { return countsKey(batch) }

// LoadLockKey is the lock a loader holds while it registers a batch.
func LoadLockKey(batch string) string { return loadLockKey(batch) }

// OwnerKey records which batch an externalId belongs to: the key of its
// extid.Key, shared by every look-alike spelling of the id.
func OwnerKey(externalID string) string { return ownerKey(extid.Key(externalID)) }

// BatchKeyPrefix is the common prefix of every key of a batch.
func BatchKeyPrefix(batch string) string { return tag(batch) + ":" }

// ArchivedKey marks a batch moved out of Redis into an archive file.
func ArchivedKey(batch string) string { return archivedKey(batch) }

// BatchOfKey returns the batch a per-batch key belongs to.
func BatchOfKey(key string) (batch string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	batch, _, ok = strings.Cut(rest, "}")
	return batch, ok && batch != ""
}
