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

// UnsafeTag is the build tag of the deliberately broken worker.
const UnsafeTag = "payout_unsafe_skip_submitting_check"

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

// build compiles cmd/payout (with the unsafe tag when broken) and
// cmd/psp-sandbox into binDir, logging the compiler's output to logPath.
func build(ctx context.Context, moduleDir, binDir string, broken bool, logPath string) (payout, psp string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", "", errors.New("the go command is not in PATH")
	}
	payout, psp = filepath.Join(binDir, "payout"), filepath.Join(binDir, "psp-sandbox")
	builds := [][]string{{"build", "-o", payout}, {"build", "-o", psp, "./cmd/psp-sandbox"}}
	if broken {
		builds[0] = append(builds[0], "-tags", UnsafeTag)
	}
	builds[0] = append(builds[0], "./cmd/payout")
	for _, args := range builds {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = moduleDir
		out, err := cmd.CombinedOutput()
		if werr := appendFile(logPath, append([]byte("$ go "+strings.Join(args, " ")+"\n"), out...)); werr != nil {
			return "", "", werr
		}
		if err != nil {
			return "", "", fmt.Errorf("go %s: %w (see %s)", strings.Join(args, " "), err, logPath)
		}
	}
	return payout, psp, nil
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
