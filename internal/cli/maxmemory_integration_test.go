//go:build integration

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/rs/zerolog"
)

// TestCheckMaxMemoryRedisServer: a real redis-server with maxmemory 0 (its
// default) gets the warning; one with a limit, none.
func TestCheckMaxMemoryRedisServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		warn  bool
	}{
		{"Redis's default, no limit", nil, true},
		{"deploy/redis.conf's kind of limit", []string{"--maxmemory", "1gb"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Start(t, tc.extra...).ClientT(t)
			var buf bytes.Buffer
			checkMaxMemory(context.Background(), rdb, zerolog.New(&buf))
			if got := strings.Contains(buf.String(), "maxmemory is 0"); got != tc.warn {
				t.Fatalf("warned %v, want %v: %q", got, tc.warn, buf.String())
			}
		})
	}
}
