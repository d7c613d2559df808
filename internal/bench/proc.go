package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Usage is what the kernel and the clock say about one finished process.
type Usage struct {
	Wall     time.Duration
	MaxRSSKB int64         // peak resident set (ru_maxrss, KB on Linux)
	CPU      time.Duration // user + system time
	ExitCode int
}

// MaxRSSMB is the peak resident set in MiB.
func (u Usage) MaxRSSMB() float64 { return float64(u.MaxRSSKB) / 1024 }

// Proc is a subprocess measured by the bench.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	start   time.Time
	out     *tail
	errs    *tail
	lines   chan string
	errFile string

	exited  chan struct{} // closed once the process has exited
	end     time.Time
	waitErr error
}

// Spec says what process to start.
type Spec struct {
	Name string // for messages
	Bin  string
	Args []string
	Env  []string
	// Lines, if not nil, receives every line of standard output (dropped
	// when full).
	Lines chan string
	// StderrFile, if set, receives standard error directly (the bench
	// process then spends nothing on it); else its tail is kept.
	StderrFile string
}

// StartProc starts a process.
func StartProc(s Spec) (*Proc, error) {
	p := &Proc{name: s.Name, out: newTail(), errs: newTail(), lines: s.Lines}
	p.cmd = exec.Command(s.Bin, s.Args...)
	p.cmd.Env = s.Env
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.errs
	if s.StderrFile != "" {
		f, err := os.Create(s.StderrFile)
		if err != nil {
			return nil, fmt.Errorf("bench: stderr of %s: %w", s.Name, err)
		}
		defer f.Close() // the child has its own copy once started
		p.cmd.Stderr = f
		p.errFile = s.StderrFile
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", s.Name, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.out.Write([]byte(line + "\n"))
			if p.lines != nil {
				select {
				case p.lines <- line:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	p.exited = make(chan struct{})
	go func() {
		<-copied // the pipe must be drained before Wait closes it
		p.waitErr = p.cmd.Wait()
		p.end = time.Now()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Started is when the process was started.
func (p *Proc) Started() time.Time { return p.start }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and returns its usage. A non-zero exit
// is reported in Usage.ExitCode, not as an error.
func (p *Proc) Wait() (Usage, error) {
	<-p.exited
	err := p.waitErr
	u := Usage{Wall: p.end.Sub(p.start)}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return u, fmt.Errorf("bench: wait for %s: %w", p.name, err)
	}
	st := p.cmd.ProcessState
	u.ExitCode = st.ExitCode()
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSSKB = ru.Maxrss
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u, nil
}

// Stop asks the process to end (SIGTERM), kills it after grace, and waits.
func (p *Proc) Stop(grace time.Duration) (Usage, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.AfterFunc(grace, func() { _ = p.cmd.Process.Kill() })
	defer t.Stop()
	return p.Wait()
}

// Output returns the last bytes of the process's standard output and error.
func (p *Proc) Output() (stdout, stderr string) {
	if p.errFile != "" {
		if b, err := os.ReadFile(p.errFile); err == nil {
			if len(b) > tailSize {
				b = b[len(b)-tailSize:]
			}
			return p.out.String(), string(b)
		}
	}
	return p.out.String(), p.errs.String()
}

// Failure describes a process that did not do what the bench expected.
func (p *Proc) Failure(u Usage, what string) error {
	out, errs := p.Output()
	return fmt.Errorf("bench: %s: %s (exit %d)\nstdout: %s\nstderr: %s", p.name, what, u.ExitCode,
		strings.TrimSpace(out), strings.TrimSpace(errs))
}

// RunProc runs a process to completion.
func RunProc(s Spec) (Usage, *Proc, error) {
	p, err := StartProc(s)
	if err != nil {
		return Usage{}, nil, err
	}
	u, err := p.Wait()
	return u, p, err
}

// CleanEnv is the bench's environment without any PAYOUT_* variable (so no
// setting of the developer leaks into a measurement), plus extra.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYOUT_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailSize = 16 << 10

func newTail() *tail { return &tail{} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if extra := t.buf.Len() - tailSize; extra > 0 {
		t.buf.Next(extra)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
