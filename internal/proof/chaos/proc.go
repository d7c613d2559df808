package chaos

import (
	"bytes"
	"context"

	"github.com/acme/payout/internal/proof/testenv/proc"
)

// startProc starts bin with args and env, appending both output streams to
// logPath.
func startProc(name, bin string, args, env []string, logPath string) (*proc.Proc, error) {
	return proc.Start(proc.Spec{Name: name, Bin: bin, Args: args, Env: env, Log: logPath})
}

// runOnce runs bin to its end (or until ctx is done: then it is killed)
// and returns its exit code and stdout. stderr, and stdout unless
// captured, are appended to logPath.
func runOnce(ctx context.Context, bin string, args, env []string, logPath string, capture bool) (int, []byte, error) {
	s := proc.Spec{Name: bin, Bin: bin, Args: args, Env: env, Log: logPath}
	var out bytes.Buffer
	if capture {
		s.Stdout = &out
	}
	u, _, err := proc.Run(ctx, s)
	if err != nil {
		return 0, nil, err
	}
	return u.ExitCode, out.Bytes(), nil
}
