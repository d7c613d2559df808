//go:build !integration

package loader

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// testRedisURL gives each test its own embedded Redis in unit runs; the
// integration build uses a real redis-server instead.
func testRedisURL(t *testing.T) string {
	return "redis://" + miniredis.RunT(t).Addr()
}
