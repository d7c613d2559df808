package redisdump

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestTextRendersEveryType(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, "s", "v-string", 0)
	rdb.HSet(ctx, "h", "f", "v-hash")
	rdb.RPush(ctx, "l", "v-list")
	rdb.SAdd(ctx, "x", "v-set")
	rdb.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "v-zset"})
	got, err := Text(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"h (hash) map[f:v-hash]", "l (list) [v-list]", "s (string) v-string", "x (set) [v-set]", "v-zset"} {
		if !strings.Contains(got, want) {
			t.Errorf("dump lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "h (hash)") > strings.Index(got, "s (string)") {
		t.Errorf("dump not sorted by key:\n%s", got)
	}
}
