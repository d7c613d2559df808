package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// dataKeyRecord is the record of the data key the loader seals card numbers
// with: never the key, only its id and fingerprint (vault.Keyring).
type dataKeyRecord struct {
	ID          string    // the key id sealed values name ("plain": none)
	Fingerprint string    // vault.Keyring.Fingerprint
	At          time.Time // when a loader last recorded it (Redis time)
	By          string    // the loader's actor
}

// writeDataKeyRecord records, for the workers to check at start, the data key
// a loader seals with: its id and fingerprint, the time (Redis's) and the
// loader (the ledger's actor).
func writeDataKeyRecord(ctx context.Context, l *ledger.Ledger, id, fingerprint string) error {
	now, err := l.Time(ctx)
	if err != nil {
		return err
	}
	if err := l.Redis().HSet(ctx, keys.DataKey(), "id", id, "fp", fingerprint,
		"at", strconv.FormatInt(now.UnixMilli(), 10), "by", l.Actor()).Err(); err != nil {
		return fmt.Errorf("record data key: %w", err)
	}
	return nil
}

// readDataKeyRecord returns the data key a loader last recorded; found is
// false when none did (no batch loaded by a version that records it).
func readDataKeyRecord(ctx context.Context, rdb redis.UniversalClient) (k dataKeyRecord, found bool, err error) {
	m, err := rdb.HGetAll(ctx, keys.DataKey()).Result()
	if err != nil {
		return k, false, fmt.Errorf("read data key: %w", err)
	}
	if m["fp"] == "" {
		return k, false, nil
	}
	ms, _ := strconv.ParseInt(m["at"], 10, 64)
	return dataKeyRecord{ID: m["id"], Fingerprint: m["fp"], At: time.UnixMilli(ms).UTC(), By: m["by"]}, true, nil
}
