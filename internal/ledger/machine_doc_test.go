package ledger

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
)

var updateDesign = flag.Bool("update", false, "rewrite the state tables of docs/design.md from lifecycle.Machine and lifecycle.Transitions")

// designDoc holds the tables generated from the machine.
const designDoc = "../../docs/design.md"

// stateTable is docs/design.md's table of states: each state, its meaning,
// and where it may go, by whom.
func stateTable() string {
	var b strings.Builder
	b.WriteString("| state | meaning | next (who) |\n|---|---|---|\n")
	for _, s := range lifecycle.Machine {
		var next []string
		for _, r := range lifecycle.Roles {
			var to []string
			for _, tr := range lifecycle.Transitions {
				if tr.From == s.State && tr.By == r && !strings.Contains(strings.Join(to, " "), "`"+string(tr.To)+"`") {
					to = append(to, "`"+string(tr.To)+"`")
				}
			}
			if len(to) > 0 {
				next = append(next, fmt.Sprintf("%s (%s)", strings.Join(to, ", "), r))
			}
		}
		if len(next) == 0 {
			next = []string{"final"}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.State, s.Meaning, strings.Join(next, "; "))
	}
	return b.String()
}

// moveTable is docs/design.md's table of every move and who makes it.
func moveTable() string {
	var b strings.Builder
	b.WriteString("| from | to | by | when |\n|---|---|---|---|\n")
	for _, tr := range lifecycle.Transitions {
		from := "(new)"
		if tr.From != "" {
			from = "`" + string(tr.From) + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", from, tr.To, tr.By, tr.Note)
	}
	return b.String()
}

// TestDesignDocStates checks docs/design.md's tables of states and moves
// against Machine and Transitions; -update rewrites them.
func TestDesignDocStates(t *testing.T) {
	raw, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, part := range []struct{ name, text string }{{"states", stateTable()}, {"moves", moveTable()}} {
		start, end := "<!-- "+part.name+":start -->\n", "<!-- "+part.name+":end -->"
		i, j := strings.Index(doc, start), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the %q ... %q markers", designDoc, start, end)
		}
		if doc[i+len(start):j] == part.text {
			continue
		}
		if !*updateDesign {
			t.Errorf("%s: the %s table is out of date: run go test ./internal/ledger -run TestDesignDocStates -update", designDoc, part.name)
			continue
		}
		doc = doc[:i+len(start)] + part.text + doc[j:]
	}
	if *updateDesign {
		if err := os.WriteFile(designDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
