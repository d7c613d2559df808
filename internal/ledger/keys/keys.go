// Package keys builds every Redis key of payout's own (Asynq's are
// Asynq's): the ledger (the write side) and package view (the read side)
// both name keys through it, and no other code spells one
// (TestKeysAreBuiltHere). The layout: package ledger's doc and
// docs/design.md.
package keys

import (
	"strconv"

	"strings"
	"time"

	"github.com/acme/payout/internal/extid"
)

// prefix begins every key of payout's own.
const prefix = "payout"

// tag is the common part of the keys of a batch: its hash tag {BATCH}
// puts them all in one Redis Cluster slot.
func tag(batch string) string { return prefix + ":{" + batch + "}" }

// Meta is the hash of a batch's metadata (phase, file, total...).
func Meta(batch string) string { return tag(batch) + ":meta" }

// Lines is the single line index of the batches registered before the
// index was chunked: read, no longer written.
func Lines(batch string) string { return tag(batch) + ":lines" }

// LineChunk is how many file lines one line-index key covers: at most
// zset-max-listpack-entries (128 by default), so each stays a listpack.
const LineChunk = 128

// LineChunks is the zset of the chunk numbers of a batch's line index.
func LineChunks(batch string) string { return tag(batch) + ":lk" }

// LineChunkOf is chunk k of a batch's line index: the externalIds of
// file lines 128k..128k+127, scored by line.
func LineChunkOf(batch string, k int64) string {
	return tag(batch) + ":l:" + strconv.FormatInt(k, 10)
}

// StateIndex is the zset of the externalIds of a batch's payouts in state
// st (any state but queued), scored by line: the console's index per
// state (package view), kept by the ledger's transition scripts' move().
func StateIndex(batch, st string) string { return tag(batch) + ":s:" + st }

// Counts is the hash of a batch's rows and minor units per state.
func Counts(batch string) string { return tag(batch) + ":counts" }

// Payout is the hash of one payout.
func Payout(batch, ext string) string { return tag(batch) + ":p:" + ext }

// LoadLock is the lock a loader holds while it registers a batch.
func LoadLock(batch string) string { return tag(batch) + ":loadlock" }

// Audit is a batch's audit stream.
func Audit(batch string) string { return tag(batch) + ":audit" }

// Archived is the summary of a batch moved into an archive file.
func Archived(batch string) string { return tag(batch) + ":archived" }

// BatchPrefix is the common prefix of every key of a batch.
func BatchPrefix(batch string) string { return tag(batch) + ":" }

// Owner is the live claim on an externalId, given in one of its claim
// forms (normally its extid.Key): the batch that owns it.
func Owner(form string) string { return prefix + ":x:" + form }

// OwnerOf is the live claim on externalID: the key of its extid.Key,
// shared by every look-alike spelling of the id.
func OwnerOf(externalID string) string { return Owner(extid.Key(externalID)) }

// Batches is the zset of batch ids scored by load time.
func Batches() string { return prefix + ":batches" }

// GlobalAudit holds the operator actions that concern no batch (pause,
// resume of the queue).
func GlobalAudit() string { return prefix + ":audit" }

// ClaimGens holds, per generation of archived claims, the claims written
// and the last day of its claims.
func ClaimGens() string { return prefix + ":xa:gens" }

// ClaimBucket is bucket k of generation gen of the archived claims.
func ClaimBucket(gen int, k uint32) string {
	return prefix + ":xa:" + strconv.Itoa(gen) + ":" + strconv.FormatUint(uint64(k), 10)
}

// Daily is the sum of the amounts loaded on the UTC day of now.
func Daily(now time.Time) string { return prefix + ":daily:" + now.UTC().Format("2006-01-02") }

// Lease is the lease of periodic work named name.
func Lease(name string) string { return prefix + ":lease:" + name }

// RateLimit is the PSP request rate limit shared by every worker
// (redis_rate adds its own prefix "rate:").
func RateLimit() string { return prefix + ":ratelimit:psp" }

// LookupSample holds the externalId of a payout the PSP created: the
// subject of the workers' check that the PSP finds orders by externalId.
func LookupSample() string { return prefix + ":psp:lookup-sample" }

// LookupVerified exists once that check succeeded.
func LookupVerified() string { return prefix + ":psp:lookup-verified" }

// Rollback holds, once a worker found the ledger gone back in time, what
// it found: no worker creates while it exists.
func Rollback() string { return prefix + ":rollback" }

// DataKey is the hash of the data key the loader seals card numbers with:
// its id and fingerprint (never the key), and when it was recorded.
func DataKey() string { return prefix + ":datakey" }

// AuthFaults is the zset of the workers (actor) whose credentials the PSP
// refused on a recheck, scored by when (Redis time, ms).
func AuthFaults() string { return prefix + ":psp:authfaults" }

// MetricsSnapshot holds the on-call gauges one worker computed from the
// ledger (internal/metrics), for every worker to export.
func MetricsSnapshot() string { return prefix + ":metrics:snapshot" }

// BatchOf returns the batch a per-batch key belongs to.
func BatchOf(key string) (batch string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	batch, _, ok = strings.Cut(rest, "}")
	return batch, ok && batch != ""
}

// ArchivedClaimsPattern matches every key of the archived claims (their
// buckets and ClaimGens), for SCAN.
func ArchivedClaimsPattern() string { return prefix + ":xa:*" }
