//go:build integration

package loader

import (
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// testRedisURL gives each test its own real Redis database or server.
func testRedisURL(t *testing.T) string { return redistest.New(t) }
