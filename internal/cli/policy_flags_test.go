package cli

import (
	"bytes"
	"testing"
)

// TestEveryWayInLoadsByTheSameRules: every command that loads a batch
// (a file, a spool, an upload, an API create) takes the deployment's
// whole load policy, by the same flag names: approval, four-eyes, limits,
// approval rules and their expiry, recipient velocity and release rules.
// A way in without one of them would let a batch past that rule.
func TestEveryWayInLoadsByTheSameRules(t *testing.T) {
	policy := []string{"approval", "four-eyes", "auto-approve-below", "max-batch-total", "daily-limit",
		"approval-rules", "approval-expiry", "velocity-count", "velocity-amount", "velocity-action",
		"pay-date-column", "release-zone", "holidays", "business-days", "release-past-tolerance", "release-horizon"}
	loaders := map[string]bool{"load": true, "run": true, "ui": true, "api": true}
	for _, c := range commands() {
		if !loaders[c.name] {
			continue
		}
		delete(loaders, c.name)
		fs := captureFlags(c, &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }})
		for _, name := range policy {
			if fs.Lookup(name) == nil {
				t.Errorf("payout %s has no --%s", c.name, name)
			}
		}
	}
	for name := range loaders {
		t.Errorf("no command %q", name)
	}
}
