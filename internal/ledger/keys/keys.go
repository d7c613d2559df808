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

// DueOf is the zset of a batch's scheduled payouts: externalIds scored by
// their release time (Unix ms), written with the payout's move to
// scheduled and left by its release or cancel (same slot as the payout).
func DueOf(batch string) string { return tag(batch) + ":due" }

// Payout is the hash of one payout.
func Payout(batch, ext string) string { return tag(batch) + ":p:" + ext }

// LoadLock is the lock a loader holds while it registers a batch.
func LoadLock(batch string) string { return tag(batch) + ":loadlock" }

// Audit is a batch's audit stream.
func Audit(batch string) string { return tag(batch) + ":audit" }

// Events is a batch's outbox of payout events: one stream entry per
// payout state change, written by the transition script's move() in the
// same call (payout:{B}:ev), read and deleted by the notifier's drain
// (package notify) once it has queued the deliveries.
func Events(batch string) string { return tag(batch) + ":ev" }

// WebhookLog is the hash of an endpoint's recent deliveries (event id ->
// record); endpoint is the endpoint's id (notify.EndpointID).
// Its hash tag {ENDPOINT} puts it in one slot with WebhookRecent.
func WebhookLog(endpoint string) string { return prefix + ":wh:{" + endpoint + "}:log" }

// WebhookRecent is the zset of the event ids of WebhookLog scored by
// their last attempt (ms): its order and its bound.
func WebhookRecent(endpoint string) string { return prefix + ":wh:{" + endpoint + "}:recent" }

// WebhookEndpoints is the hash of the endpoints deliveries were made to:
// endpoint id -> redacted URL (what the console lists).
func WebhookEndpoints() string { return prefix + ":wh:endpoints" }

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

// Watch is the zset of a batch's paid payouts under watch (money may
// come back): one member per watched payout, its externalId, scored by
// when its next watch check is due (Redis time, ms).
func Watch(batch string) string { return tag(batch) + ":w" }

// Watching is the zset of the batches that have, or had, paid payouts
// under watch, scored by the latest end of their watch windows (ms): the
// workers' watch sweep reads it instead of every batch.
func Watching() string { return prefix + ":watching" }

// Batches is the zset of batch ids scored by load time.
func Batches() string { return prefix + ":batches" }

// Due is the workers' release index: the zset of the batches that hold
// scheduled payouts, each scored by the earliest release time (Unix ms)
// not yet released (a batch awaiting approval is looked at again later).
func Due() string { return prefix + ":due" }

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

// Velocity is the count and sum of the payouts loaded on UTC day day
// (2006-01-02, Redis's clock) to the destination whose keyed hash is tag
// (never the destination itself): the recipient velocity limit.
func Velocity(day, tag string) string { return prefix + ":velocity:" + day + ":" + tag }

// VelocityDay is the day of now as Velocity names it.
func VelocityDay(now time.Time) string { return now.UTC().Format("2006-01-02") }

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

// APIToken is the hash of one API token (package api), named by the
// SHA-256 of the token (hex): the token itself is never stored.
func APIToken(sha string) string { return prefix + ":apitoken:" + sha }

// APITokens is the hash of the API tokens by name: name -> SHA-256 (hex).
func APITokens() string { return prefix + ":apitokens" }

// Idempotency is the record of one Idempotency-Key of one API token:
// scope is the token's name, sum the SHA-256 (hex) of the key, so that
// whatever a client sends makes a key of bounded length.
func Idempotency(scope, sum string) string { return prefix + ":idem:" + scope + ":" + sum }

// APIRate is the request rate limit of one API token (redis_rate adds its
// own prefix "rate:").
func APIRate(name string) string { return prefix + ":ratelimit:api:" + name }

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

// MailSent marks the mail of one event (an id of package mail) to one
// recipient (RCPT: a hash of the address, never the address): "sending"
// from just before the SMTP transaction, "sent" once the server took the
// message. It expires (mail.DedupeTTL).
func MailSent(event, rcpt string) string { return prefix + ":mail:sent:" + event + ":" + rcpt }

// MailReview is the zset of the payouts moved to needs_review that the
// next digest mail to the operators lists (package mail), scored by when
// they were added (ms).
func MailReview() string { return prefix + ":mail:review" }
