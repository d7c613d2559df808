package doccheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// readmeMaxLines bounds the front door: what payout is, the first two
// commands, the picture, the file in one table, the commands, and links
// into docs/ for everything else.
const readmeMaxLines = 250

// TestReadmeFitsTheFrontDoor fails when README.md grows past
// readmeMaxLines: detail belongs in docs/, which the README links to.
func TestReadmeFitsTheFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail into docs/ and link to it", n, readmeMaxLines)
	}
}
