package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The memory figures and the sizing rule of docs/operations.md assume
// compact listpack hashes: Redis must allow values of wantListpackValue
// bytes (deploy/redis.conf; Redis's default is 64, under a queued Asynq
// task's ~200-byte message) and at least wantListpackEntries fields (Redis
// 7's default is 512; the buckets of archived claims average 64 and must
// stay listpacks).
const (
	wantListpackValue   = 512
	wantListpackEntries = 128
)

// hashLimits are Redis's hash-max-listpack-value and
// hash-max-listpack-entries as CONFIG GET answers them ("" when absent).
type hashLimits struct {
	value, entries string
}

// readHashLimits asks Redis for its hash encoding limits. The error is
// CONFIG GET's refusal (managed Redis services often refuse CONFIG).
func readHashLimits(ctx context.Context, rdb redis.UniversalClient) (hashLimits, error) {
	m, err := rdb.ConfigGet(ctx, "hash-max-listpack-*").Result()
	if err != nil {
		return hashLimits{}, err
	}
	return hashLimits{value: m["hash-max-listpack-value"], entries: m["hash-max-listpack-entries"]}, nil
}

// advice says what to log of h, read with error err: a warning naming each
// limit below what the sizing rule assumes with its fix, an info line when
// the limits could not be read, zerolog.NoLevel when they are fine.
func (h hashLimits) advice(err error) (zerolog.Level, string) {
	const unknown = "redis hash encoding limits could not be checked: the memory sizing (docs/operations.md) assumes hash-max-listpack-value %d and hash-max-listpack-entries %d or more, as deploy/redis.conf sets (%s)"
	if err != nil {
		return zerolog.InfoLevel, fmt.Sprintf(unknown, wantListpackValue, wantListpackEntries, "CONFIG GET: "+err.Error())
	}
	var low, fix, cost []string
	for _, l := range []struct {
		name, got, cost string
		want            int
	}{
		{"hash-max-listpack-value", h.value, "every queued Asynq task hash becomes a hashtable, about 150 B more per queued payout", wantListpackValue},
		{"hash-max-listpack-entries", h.entries, "the claim buckets of archived batches (64 ids each on average) become hashtables", wantListpackEntries},
	} {
		n, err := strconv.Atoi(l.got)
		if err != nil {
			return zerolog.InfoLevel, fmt.Sprintf(unknown, wantListpackValue, wantListpackEntries, fmt.Sprintf("CONFIG GET %s answered %q", l.name, l.got))
		}
		if n < l.want {
			low = append(low, fmt.Sprintf("%s is %d, below the %d", l.name, n, l.want))
			fix = append(fix, fmt.Sprintf("CONFIG SET %s %d", l.name, l.want))
			cost = append(cost, l.cost)
		}
	}
	if len(low) == 0 {
		return zerolog.NoLevel, ""
	}
	return zerolog.WarnLevel, fmt.Sprintf("redis %s the memory sizing assumes (docs/operations.md): %s; fix: %s, and the same in redis.conf (deploy/redis.conf)",
		strings.Join(low, " and "), strings.Join(cost, "; "), strings.Join(fix, " and "))
}

// checkHashLimits logs, once at start, when Redis's hash encoding limits
// are below what the sizing rule assumes, or cannot be read. It never
// fails and changes nothing. Not for the embedded Redis (miniredis has no
// encodings and no CONFIG).
func checkHashLimits(ctx context.Context, rdb redis.UniversalClient, log zerolog.Logger) {
	h, err := readHashLimits(ctx, rdb)
	lvl, msg := h.advice(err)
	if lvl == zerolog.NoLevel {
		return
	}
	log.WithLevel(lvl).Str("hash_max_listpack_value", h.value).Str("hash_max_listpack_entries", h.entries).Msg(msg)
}
