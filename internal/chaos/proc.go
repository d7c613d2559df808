package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is a subprocess whose stdout and stderr go to a log file. A
// goroutine waits for it, so that exits are noticed without blocking.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of Wait, once done is closed
}

// startProc starts bin with args and env, appending both output streams to
// logPath.
func startProc(name, bin string, args, env []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the exit status once the process ended (-1 for a signal).
func (p *proc) exitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// kill sends SIGKILL and waits for the end (idempotent).
func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

// runOnce runs bin to its end (or until ctx is done: then it is killed)
// and returns its exit code and stdout. stderr, and stdout unless
// captured, are appended to logPath.
func runOnce(ctx context.Context, bin string, args, env []string, logPath string, capture bool) (int, []byte, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, f
	if capture {
		cmd.Stdout = &out
	}
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return ee.ExitCode(), out.Bytes(), nil
	}
	if err != nil {
		return 0, nil, err
	}
	return 0, out.Bytes(), nil
}
