// Package redisdump renders a Redis database as text, whatever the types of
// its keys, so that a leak scan can search every value ever written (DUMP
// is binary, and miniredis does not support it for every type).
package redisdump

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Contents returns every key of the database with its value rendered as
// "(type) value".
func Contents(ctx context.Context, rdb redis.UniversalClient) (map[string]string, error) {
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, fmt.Errorf("redis keys: %w", err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("redis type %s: %w", k, err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		default:
			v = ""
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("redis read %s: %w", k, err)
		}
		out[k] = fmt.Sprintf("(%s) %v", typ, v)
	}
	return out, nil
}

// Text is Contents as one "key (type) value" line per key, sorted by key.
func Text(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	m, err := Contents(ctx, rdb)
	if err != nil {
		return "", err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", k, m[k])
	}
	return b.String(), nil
}
