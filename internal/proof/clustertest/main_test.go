package clustertest

import (
	"os"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/gobuild"
)

func TestMain(m *testing.M) { os.Exit(gobuild.Main(m)) }
