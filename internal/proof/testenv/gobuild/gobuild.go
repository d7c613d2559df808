// Package gobuild compiles the module's commands for tests, the bench and
// the chaos suite: go build with tags into a directory, the compiler's
// output logged; Binary caches what a test process built, so that every
// test of a run shares one build of each command.
package gobuild

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/proof/testenv"
)

// ModulePath is the module whose commands are built.
const ModulePath = "github.com/acme/payout"

// Target is one program to build: its output name, package and tags.
type Target struct {
	Name string // file name in the output directory
	Pkg  string // e.g. "./cmd/payout" (relative to the module) or an import path
	Tags []string
}

// Options say how to run go build.
type Options struct {
	ModuleDir string   // where go runs; "": the current directory
	Go        string   // the go command; "": go from PATH
	Flags     []string // more build flags, e.g. "-trimpath"
	Env       []string // added to the environment, e.g. "CGO_ENABLED=0"
	Log       string   // file the commands and the compiler's output are appended to; "": none
}

// Build compiles each target into binDir and returns the path of each by
// name.
func Build(ctx context.Context, o Options, binDir string, targets []Target) (map[string]string, error) {
	goBin := o.Go
	if goBin == "" {
		var err error
		if goBin, err = exec.LookPath("go"); err != nil {
			return nil, errors.New("the go command is not in PATH")
		}
	}
	paths := map[string]string{}
	for _, b := range targets {
		out := filepath.Join(binDir, b.Name)
		args := append([]string{"build", "-o", out}, o.Flags...)
		if len(b.Tags) > 0 {
			args = append(args, "-tags", strings.Join(b.Tags, ","))
		}
		args = append(args, b.Pkg)
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = o.ModuleDir
		if len(o.Env) > 0 {
			cmd.Env = append(os.Environ(), o.Env...)
		}
		text, err := cmd.CombinedOutput()
		if o.Log != "" {
			if werr := appendFile(o.Log, append([]byte("$ go "+strings.Join(args, " ")+"\n"), text...)); werr != nil {
				return nil, werr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, text)
		}
		paths[b.Name] = out
	}
	return paths, nil
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FindModule returns the root of the payout module: dir or its nearest
// parent holding a go.mod that declares ModulePath.
func FindModule(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

func isModuleRoot(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == ModulePath
		}
	}
	return false
}

// cache holds what this test process built: one directory, one binary per
// package and tags.
var cache struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
}

// Binary builds the command pkg (an import path, e.g.
// "github.com/acme/payout/cmd/payout") with tags once per test process and
// returns the path of the binary. A package whose tests use it removes the
// binaries at the end with Main in its TestMain.
func Binary(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	testenv.NeedTool(t, "go") // go test puts its own GOROOT/bin first on the PATH
	key := pkg + " " + strings.Join(tags, ",")
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if p, ok := cache.bins[key]; ok {
		return p
	}
	if cache.dir == "" {
		dir, err := os.MkdirTemp("", "payout-gobuild-")
		if err != nil {
			t.Fatal(err)
		}
		cache.dir, cache.bins = dir, map[string]string{}
	}
	name := fmt.Sprintf("%s-%d", filepath.Base(pkg), len(cache.bins))
	paths, err := Build(context.Background(), Options{}, cache.dir, []Target{{Name: name, Pkg: pkg, Tags: tags}})
	if err != nil {
		t.Fatal(err)
	}
	cache.bins[key] = paths[name]
	return paths[name]
}

// Main runs the tests and then removes what Binary built; TestMain calls
// os.Exit(gobuild.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.dir != "" {
		_ = os.RemoveAll(cache.dir)
		cache.dir, cache.bins = "", nil
	}
	return code
}
