package proof

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv"
)

// shipped are the commands whose binaries ship (the image, the packages).
var shipped = []string{
	"github.com/acme/payout/cmd/payout",
	"github.com/acme/payout/cmd/psp-sandbox",
	"github.com/acme/payout/cmd/healthcheck",
}

// proofPrefix is the import path every package of the harness starts with.
const proofPrefix = "github.com/acme/payout/internal/proof"

// TestProductLinksNoProof fails naming the package when a shipped command
// depends on a package of the harness.
func TestProductLinksNoProof(t *testing.T) {
	goBin := testenv.NeedTool(t, "go")
	for _, cmd := range shipped {
		out, err := exec.Command(goBin, "list", "-deps", cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", cmd, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", cmd)
		}
		for _, p := range harness(deps) {
			t.Errorf("%s links %s, a package of the harness", cmd, p)
		}
	}
}

// harness returns the import paths of deps that are under internal/proof.
func harness(deps []string) []string {
	var out []string
	for _, p := range deps {
		if p == proofPrefix || strings.HasPrefix(p, proofPrefix+"/") {
			out = append(out, p)
		}
	}
	return out
}

func TestHarnessFindsProofPackages(t *testing.T) {
	deps := []string{
		"fmt",
		"github.com/acme/payout/internal/ledger",
		"github.com/acme/payout/internal/proof/testenv",
		"github.com/acme/payout/internal/proofreader",
		proofPrefix,
	}
	got := harness(deps)
	want := []string{"github.com/acme/payout/internal/proof/testenv", proofPrefix}
	if !slices.Equal(got, want) {
		t.Errorf("harness = %q, want %q", got, want)
	}
}
