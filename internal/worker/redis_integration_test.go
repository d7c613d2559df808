//go:build integration

package worker

import (
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// testRedisURL gives each test its own real Redis database or server.
func testRedisURL(t *testing.T) string { return redistest.New(t) }
