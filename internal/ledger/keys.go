package ledger

import "strings"

// The ledger owns the Redis keys of payout (Asynq's are Asynq's): the
// per-batch keys its methods build (tag, payoutKey, ...) and the workers'
// shared keys below. Code outside the ledger, tests included, gets a key
// from these functions, never builds one (keys_test.go checks it). The
// layout: docs/design.md.

// keys builds the keys of the default prefix for the exported builders.
var keys = &Ledger{prefix: "payout"}

// PayoutKey is the hash of one payout.
func PayoutKey(batch, externalID string) string { return keys.payoutKey(batch, externalID) }

// MetaKey is the hash of a batch's metadata (phase, file, total...).
func MetaKey(batch string) string { return keys.metaKey(batch) }

// CountsKey is the hash of a batch's counters per state.
func CountsKey(batch string) string { return keys.countsKey(batch) }

// LoadLockKey is the lock a loader holds while it registers a batch.
func LoadLockKey(batch string) string { return keys.loadLockKey(batch) }

// OwnerKey records which batch an externalId belongs to.
func OwnerKey(externalID string) string { return keys.ownerKey(externalID) }

// BatchKeyPrefix is the common prefix of every key of a batch.
func BatchKeyPrefix(batch string) string { return keys.tag(batch) + ":" }

// RateLimitKey is the PSP request rate limit shared by every worker.
func RateLimitKey() string { return keys.prefix + ":ratelimit:psp" }

// LookupSampleKey holds the externalId of a payout the PSP created: the
// subject of the workers' check that the PSP finds orders by externalId.
func LookupSampleKey() string { return keys.prefix + ":psp:lookup-sample" }

// LookupVerifiedKey exists once that check succeeded.
func LookupVerifiedKey() string { return keys.prefix + ":psp:lookup-verified" }

// ArchivedKey marks a batch moved out of Redis into an archive file.
func ArchivedKey(batch string) string { return keys.archivedKey(batch) }

// BatchOfKey returns the batch a per-batch key belongs to.
func BatchOfKey(key string) (batch string, ok bool) {
	rest, ok := strings.CutPrefix(key, keys.prefix+":{")
	if !ok {
		return "", false
	}
	batch, _, ok = strings.Cut(rest, "}")
	return batch, ok && batch != ""
}
