package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath is the module whose binaries the suite builds.
const ModulePath = "github.com/acme/payout"

// UnsafeTag is the build tag of the deliberately broken worker that POSTs
// again when a redelivered create finds its payout in submitting.
const UnsafeTag = "payout_unsafe_skip_submitting_check"

// ReplayTag is the build tag of the deliberately broken worker whose HTTP
// transport may replay a create after a stream reset (internal/psp).
const ReplayTag = "payout_unsafe_replayable_create"

// ClockTag is the build tag of the worker whose task clock is off by
// PAYOUT_TEST_CLOCK_OFFSET (jobs/clock_testclock.go).
const ClockTag = "payout_test_clock"

// ClockEnv is the environment variable a ClockTag build reads its offset
// from.
const ClockEnv = "PAYOUT_TEST_CLOCK_OFFSET"

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

// buildSpec is one program to build: its output name, package and tags.
type buildSpec struct {
	name, pkg string
	tags      []string
}

// build compiles each binary into binDir, logging the compiler's output to
// logPath, and returns the path of each by name.
func build(ctx context.Context, moduleDir, binDir string, bins []buildSpec, logPath string) (map[string]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("the go command is not in PATH")
	}
	paths := map[string]string{}
	for _, b := range bins {
		out := filepath.Join(binDir, b.name)
		args := []string{"build", "-o", out}
		if len(b.tags) > 0 {
			args = append(args, "-tags", strings.Join(b.tags, ","))
		}
		args = append(args, b.pkg)
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = moduleDir
		text, err := cmd.CombinedOutput()
		if werr := appendFile(logPath, append([]byte("$ go "+strings.Join(args, " ")+"\n"), text...)); werr != nil {
			return nil, werr
		}
		if err != nil {
			return nil, fmt.Errorf("go %s: %w (see %s)", strings.Join(args, " "), err, logPath)
		}
		paths[b.name] = out
	}
	return paths, nil
}

// binaries lists what a run with c builds: payout (with the broken tags
// asked for), payout-clock (the same with ClockTag) when one worker's clock
// is off, and psp-sandbox.
func binaries(c Config) []buildSpec {
	var tags []string
	if c.Broken {
		tags = append(tags, UnsafeTag)
	}
	if c.BrokenReplay {
		tags = append(tags, ReplayTag)
	}
	bins := []buildSpec{{name: "payout", pkg: "./cmd/payout", tags: tags}}
	if c.ClockOffset != 0 {
		bins = append(bins, buildSpec{name: "payout-clock", pkg: "./cmd/payout", tags: append(append([]string(nil), tags...), ClockTag)})
	}
	return append(bins, buildSpec{name: "psp-sandbox", pkg: "./cmd/psp-sandbox"})
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

// writeSecret writes a file readable by the owner only, through a rename,
// so that a reader sees the old content or the new, never half.
func writeSecret(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
