package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// What keeps one misconfigured worker from stopping the fleet: the data
// key the loader seals with, which a starting worker must hold, and the
// workers whose PSP credentials were refused on a recheck, which pause the
// queue only when two of them agree (internal/worker, authfault.go).

// DataKey is the record of the data key the loader seals card numbers
// with: never the key, only its id and fingerprint (vault.Keyring).
type DataKey struct {
	ID          string    // the key id sealed values name ("plain": none)
	Fingerprint string    // vault.Keyring.Fingerprint
	At          time.Time // when a loader last recorded it (Redis time)
	By          string    // the loader's actor
}

// RecordDataKey records, for the workers to check at start, the data key
// a loader seals with: its id and fingerprint, the time and the loader.
func (l *Ledger) RecordDataKey(ctx context.Context, id, fingerprint string) error {
	now, err := l.Time(ctx)
	if err != nil {
		return err
	}
	if err := l.rdb.HSet(ctx, dataKeyKey(), "id", id, "fp", fingerprint,
		"at", strconv.FormatInt(now.UnixMilli(), 10), "by", l.actor).Err(); err != nil {
		return fmt.Errorf("ledger: record data key: %w", err)
	}
	return nil
}

// RecordedDataKey returns the data key a loader last recorded; found is
// false when none did (no batch loaded by a version that records it).
func (l *Ledger) RecordedDataKey(ctx context.Context) (k DataKey, found bool, err error) {
	m, err := l.rdb.HGetAll(ctx, dataKeyKey()).Result()
	if err != nil {
		return k, false, fmt.Errorf("ledger: read data key: %w", err)
	}
	if m["fp"] == "" {
		return k, false, nil
	}
	ms, _ := strconv.ParseInt(m["at"], 10, 64)
	return DataKey{ID: m["id"], Fingerprint: m["fp"], At: time.UnixMilli(ms).UTC(), By: m["by"]}, true, nil
}

// reportAuthFaultScript records that worker ARGV[1] had its credentials
// refused now (Redis time), forgets reports older than ARGV[2] ms, and
// returns how many distinct workers reported within that window.
// KEYS: the auth faults zset.
var reportAuthFaultScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%.0f', now - window))
redis.call('PEXPIRE', KEYS[1], window)
return redis.call('ZCARD', KEYS[1])
`)

// ReportAuthFault records that this ledger's actor (a worker process) had
// its PSP credentials refused, confirmed by its own recheck, and returns
// how many distinct workers did so within window, this one included.
func (l *Ledger) ReportAuthFault(ctx context.Context, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, errors.New("ledger: auth fault window must be positive")
	}
	n, err := reportAuthFaultScript.Run(ctx, l.rdb, []string{authFaultsKey()}, l.actor, window.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("ledger: report auth fault: %w", err)
	}
	return n, nil
}
