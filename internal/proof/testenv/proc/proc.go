// Package proc supervises the subprocesses of tests, the bench and the chaos
// suite: it starts a binary with its arguments and environment, sends its
// output to a log file or keeps the tail of it for failure messages, stops
// it gracefully (SIGTERM, then SIGKILL after a deadline) or kills it, and
// reports what the kernel measured (wall and CPU time, peak RSS). On Linux a
// subprocess dies with the process that started it, so that even a test
// killed by its timeout leaves nothing running.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Spec says what process to start and where its output goes.
type Spec struct {
	Name string // for messages
	Bin  string
	Args []string
	Env  []string // nil: the current environment
	Dir  string   // working directory; "": the current one
	// Log, if set, is the file (created or appended to) that receives
	// standard error, and standard output unless Stdout or Lines take it.
	// Without Log both are kept in memory (the last TailSize bytes).
	Log string
	// Stdout, if set, receives standard output.
	Stdout io.Writer
	// Lines, if not nil, receives every line of standard output (dropped
	// when full); standard output is then also kept in memory.
	Lines chan string
}

// Usage is what the kernel and the clock say about one finished process.
type Usage struct {
	Wall     time.Duration
	MaxRSSKB int64         // peak resident set (ru_maxrss, KB on Linux)
	CPU      time.Duration // user + system time
	ExitCode int           // -1 for a process ended by a signal
}

// MaxRSSMB is the peak resident set in MiB.
func (u Usage) MaxRSSMB() float64 { return float64(u.MaxRSSKB) / 1024 }

// ErrKilled is returned by Stop when the process did not exit within its
// grace after SIGTERM and was killed.
var ErrKilled = errors.New("no exit after SIGTERM, killed")

// Proc is a running (or ended) subprocess. A goroutine waits for it, so
// that its end is noticed without blocking.
type Proc struct {
	spec  Spec
	cmd   *exec.Cmd
	start time.Time
	out   *Tail // standard output kept in memory (nil when it goes elsewhere)
	errs  *Tail // standard error kept in memory (nil with a Log)

	done    chan struct{} // closed once the process has exited
	end     time.Time
	waitErr error
}

// Start starts the process described by s.
func Start(s Spec) (*Proc, error) {
	p := &Proc{spec: s, done: make(chan struct{})}
	p.cmd = exec.Command(s.Bin, s.Args...)
	p.cmd.Env, p.cmd.Dir = s.Env, s.Dir
	p.cmd.SysProcAttr = procAttr()
	var log *os.File
	if s.Log != "" {
		f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s: log file: %w", s.Name, err)
		}
		defer f.Close() // the child has its own copy once started
		log = f
		p.cmd.Stderr = f
	} else {
		p.errs = &Tail{}
		p.cmd.Stderr = p.errs
	}
	var stdout io.ReadCloser
	switch {
	case s.Lines != nil:
		p.out = &Tail{}
		pipe, err := p.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stdout = pipe
	case s.Stdout != nil:
		p.cmd.Stdout = s.Stdout
	case log != nil:
		p.cmd.Stdout = log
	default:
		p.out = &Tail{}
		p.cmd.Stdout = p.out
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if stdout != nil {
			p.copyLines(stdout)
		}
	}()
	go func() {
		<-copied // a pipe must be drained before Wait closes it
		p.waitErr = p.cmd.Wait()
		p.end = time.Now()
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) copyLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = p.out.Write([]byte(line + "\n"))
		select {
		case p.spec.Lines <- line:
		default:
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Run runs the process to its end and returns its usage; a non-zero exit is
// in Usage.ExitCode, not an error. When ctx is done first the process is
// killed and ctx's error returned.
func Run(ctx context.Context, s Spec) (Usage, *Proc, error) {
	p, err := Start(s)
	if err != nil {
		return Usage{}, nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Kill()
		return Usage{}, p, ctx.Err()
	}
	u, err := p.Wait()
	return u, p, err
}

// Name is the name the process was started with.
func (p *Proc) Name() string { return p.spec.Name }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Started is when the process was started.
func (p *Proc) Started() time.Time { return p.start }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode waits for the end and returns the exit status (-1 for a signal).
func (p *Proc) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process (nothing once it has ended).
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the end (idempotent): a crash.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to end (SIGTERM), kills it after grace (then the
// error is ErrKilled), and returns its usage.
func (p *Proc) Stop(grace time.Duration) (Usage, error) {
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
		u, _ := p.Wait()
		return u, fmt.Errorf("%s: %w after %s", p.spec.Name, ErrKilled, grace)
	}
	return p.Wait()
}

// Wait waits for the process to exit and returns its usage. A non-zero
// exit is reported in Usage.ExitCode, not as an error.
func (p *Proc) Wait() (Usage, error) {
	<-p.done
	u := Usage{Wall: p.end.Sub(p.start)}
	var exit *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &exit) {
		return u, fmt.Errorf("%s: wait: %w", p.spec.Name, p.waitErr)
	}
	st := p.cmd.ProcessState
	u.ExitCode = st.ExitCode()
	u.CPU = st.UserTime() + st.SystemTime()
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSSKB = ru.Maxrss
	}
	return u, nil
}

// Output returns the last bytes of standard output kept in memory ("" when
// it went elsewhere) and of standard error (or of the Log).
func (p *Proc) Output() (stdout, stderr string) {
	if p.out != nil {
		stdout = p.out.String()
	}
	if p.errs != nil {
		return stdout, p.errs.String()
	}
	return stdout, p.Tail(TailSize)
}

// Tail returns the last n bytes of the Log, or of what standard error and
// output left in memory without one.
func (p *Proc) Tail(n int) string {
	var s string
	if p.spec.Log != "" {
		b, _ := os.ReadFile(p.spec.Log)
		s = string(b)
	} else {
		out, errs := p.Output()
		s = out + errs
	}
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// Failure describes a process that did not do what its caller expected,
// with its exit code and the tails of its output.
func (p *Proc) Failure(u Usage, what string) error {
	out, errs := p.Output()
	return fmt.Errorf("%s: %s (exit %d)\nstdout: %s\nstderr: %s", p.spec.Name, what, u.ExitCode,
		strings.TrimSpace(out), strings.TrimSpace(errs))
}
