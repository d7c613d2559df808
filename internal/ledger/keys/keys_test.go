package keys

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// keyLike matches a string literal that builds a payout Redis key or a
// piece of one: "payout:{", "payout:x:", "}:p:", ":x:".
var keyLike = regexp.MustCompile(`^(payout:[^\s]|\}:|:[a-z]:$)`)

// notPayoutKeys are literals that keyLike matches but that name no key of
// the ledger's layout, each with the reason.
var notPayoutKeys = map[string]string{
	"payout:test:":       "test tooling's own counter (testenv/redistest)",
	"payout:deploy-test": "a scratch key the deploy test writes to see it in the AOF",
}

// otherOwners are files that build keys of another owner.
var otherOwners = map[string]string{
	"internal/queue/live.go":            "Asynq's task keys, read directly by their one owner, the queue",
	"internal/queue/paused.go":          "Asynq's pause flag of a queue, read by its one owner, the queue",
	"internal/proof/bench/memory.go":    "names the kind of every key for the memory report; reads keys, builds none",
	"internal/proof/bench/asynqtask.go": "Asynq's queue keys, for the memory simulation's fast path that dequeues and completes tasks as an Asynq server does",
}

func allowed(v string) bool {
	for p := range notPayoutKeys {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// TestKeysAreBuiltHere fails when Go code outside this package (the
// ledger's and the tests' included) spells a payout key instead of calling
// its builders.
func TestKeysAreBuiltHere(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == own || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") ||
				path != root && exists(filepath.Join(path, "go.mod")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.HasSuffix(path, ".go") || otherOwners[filepath.ToSlash(rel)] != "" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err == nil && keyLike.MatchString(v) && !allowed(v) {
				found = append(found, fset.Position(lit.Pos()).String()+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: a Redis key built outside package keys; use its builders (internal/ledger/keys)", f)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestBatchOf(t *testing.T) {
	for _, tt := range []struct {
		key, batch string
		ok         bool
	}{
		{Payout("b1", "E-1"), "b1", true},
		{Meta("b2"), "b2", true},
		{OwnerOf("E-1"), "", false},
		{"asynq:{payouts}:t:x", "", false},
		{"payout:{}:meta", "", false},
	} {
		if b, ok := BatchOf(tt.key); b != tt.batch || ok != tt.ok {
			t.Errorf("BatchOf(%q) = %q, %v; want %q, %v", tt.key, b, ok, tt.batch, tt.ok)
		}
	}
}
