package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a server child process that can be stopped and started again
// with the same command line.
type process struct {
	name    string
	argv    []string
	env     []string
	dir     string
	logPath string
	// cleanEnv: the process gets env alone, not the test's environment
	// with env added (so a developer's SEQKEEPER_* settings stay out).
	cleanEnv bool
	// grace is how long stop waits before escalating to SIGKILL; 0: 10 s.
	grace time.Duration

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // how the last incarnation exited; read after done
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done: // it exited by itself: start it again
		default:
			return nil
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.name, err)
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	if p.cleanEnv {
		cmd.Env = append([]string(nil), p.env...)
	}
	// Each incarnation's output follows a line that says when it began.
	fmt.Fprintf(logf, "=== %s: %s started\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// The kernel kills the server if the test binary dies without running
	// Main's cleanup (a panic, a timeout, a SIGKILL).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start %s: %w", p.name, p.argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "=== %s: %s exited: %v\n", time.Now().Format(time.RFC3339Nano), p.name, exitText(err))
		logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// stop sends sig and waits for the process to exit, escalating to SIGKILL
// after the grace period. It returns how the process exited (nil: exit
// status 0), or nil if it was not running.
func (p *process) stop(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	grace := p.grace
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if grace == 0 {
		grace = 10 * time.Second
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) // a frozen one handles sig only once it runs
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s did not exit within %s of %s: killed", p.name, grace, sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// exitText describes how a process exited.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (p *process) kill() { _ = p.stop(syscall.SIGKILL) }

// signal sends sig to the process's group, if it runs.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// running reports whether the process is alive.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exited returns a channel closed when the current incarnation exits.
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// waitFor polls ready until it succeeds, the process exits, or the timeout.
func (p *process) waitFor(timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	exited := p.exited()
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up (log: %s): %w", p.name, p.logPath, errors.Join(last, tail(p.logPath)))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s (log: %s): %w", p.name, timeout, p.logPath, last)
}

// tail returns the end of a log file as an error, for failure messages.
func tail(path string) error {
	return tailN(path, 2000)
}

// tailN returns the last n bytes of a log file as an error, or nil when
// it cannot be read.
func tailN(path string, n int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return fmt.Errorf("log tail:\n%s", b)
}
