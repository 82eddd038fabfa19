// Package proc runs meshperf's child processes (the control plane, echo
// servers, sidecars, load generators, Prometheus) and learns their state from
// what they write for machines, never from their human log lines. It is the
// one supervisor: Start a Spec on the host (or, through Spec.Launch, in a lab
// pod), WaitReady for its ready file (or WaitListening for a program that
// cannot write one), Signal, Kill or Stop it (SIGTERM, then SIGKILL after a
// grace period), and ExitReason says how it ended with the last line it
// logged.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultStopGrace is how long Stop waits between SIGTERM and SIGKILL when
// the Spec gives no grace period.
const DefaultStopGrace = 3 * time.Second

// killWait bounds the wait for a process to be reaped after SIGKILL: past
// it the process is stuck in the kernel (uninterruptible sleep), and
// waiting longer would hang the caller.
const killWait = 5 * time.Second

// User is the identity a process runs as. Istio runs the sidecar as
// uid/gid 1337 so that capture can tell its traffic from the app's.
type User struct {
	UID, GID uint32
}

// Spec says what to start and how.
type Spec struct {
	// Name says what the process is in messages, e.g. "control plane".
	Name string
	// Path is the program, resolved on PATH if it has no slash.
	Path string
	// Args are the arguments after the program's name.
	Args []string
	// Env is the whole environment; nil means this process's.
	Env []string
	// Dir is the working directory; empty means this process's.
	Dir string
	// Stdin feeds the process; nil means /dev/null.
	Stdin io.Reader
	// LogPath receives stdout and stderr, appended to. The child writes the
	// file itself rather than through a pipe to us, so that it keeps
	// running and logging if meshperf exits first (meshperf lab -keep);
	// Tail reads the file's end. Empty keeps only the last 64 KiB of
	// output, in memory.
	LogPath string
	// ReadyFile is where the process writes its Ready (its --ready-file).
	// Start removes a stale one first, so that WaitReady never reads a
	// previous run's addresses.
	ReadyFile string
	// User runs the process as another uid/gid; nil runs it as the caller.
	User *User
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; zero
	// means DefaultStopGrace.
	StopGrace time.Duration
	// ParentDeathSignal is sent to the process when the thread that started
	// it dies (prctl's PR_SET_PDEATHSIG), so that a server a test binary
	// started does not outlive a test binary that was killed; zero sends
	// none.
	ParentDeathSignal syscall.Signal
	// CPULimit caps the process's CPU at this many CPUs, as a container's
	// CPU limit does (cpulimit.go); zero leaves it unlimited. Needs root.
	CPULimit float64
	// Detached starts the process in a session of its own that outlives
	// meshperf (the local cluster's components keep running after `meshperf
	// cluster up` returns): no parent-death signal, no terminal's Ctrl-C.
	// It needs LogPath, as a pipe to meshperf would close when meshperf
	// exits. A later meshperf stops it through its Record.
	Detached bool
	// Launch starts the prepared command; nil means (*exec.Cmd).Start. A
	// lab pod passes its own, which forks the child inside the pod's
	// network namespace.
	Launch func(*exec.Cmd) error
}

// Process is a started child: in a process group of its own, so that a
// terminal's Ctrl-C reaches only meshperf, which then stops its children in
// order, and so that signals reach whatever the child forked. Its methods
// are safe for concurrent use.
type Process struct {
	spec Spec
	cmd  *exec.Cmd
	out  *tailBuffer // nil when the output goes to spec.LogPath

	done    chan struct{} // closed once the process is reaped
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// Start starts the process described by spec.
func Start(spec Spec) (*Process, error) {
	if spec.Name == "" {
		spec.Name = spec.Path
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	if cmd.Err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, cmd.Err)
	}
	cmd.Env, cmd.Dir, cmd.Stdin = spec.Env, spec.Dir, spec.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: spec.ParentDeathSignal}
	if spec.Detached {
		if spec.LogPath == "" || spec.ParentDeathSignal != 0 {
			return nil, fmt.Errorf("start %s: a detached process needs a log file and no parent-death signal", spec.Name)
		}
		// A session leader is also its process group's leader, so Signal
		// still reaches whatever it forked.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if spec.User != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: spec.User.UID, Gid: spec.User.GID}
	}
	p := &Process{spec: spec, cmd: cmd, done: make(chan struct{})}
	if spec.LogPath != "" {
		f, err := os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("%s: log file: %w", spec.Name, err)
		}
		// The child holds its own copy of the descriptor once started.
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		p.out = &tailBuffer{}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		// A grandchild that keeps the pipe open must not hold up Wait.
		cmd.WaitDelay = time.Second
	}
	if spec.ReadyFile != "" {
		if err := os.Remove(spec.ReadyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: stale ready file: %w", spec.Name, err)
		}
	}
	if spec.CPULimit != 0 && !(spec.CPULimit > 0 && spec.CPULimit < math.Inf(1)) {
		return nil, fmt.Errorf("start %s: CPU limit must be above 0, got %v", spec.Name, spec.CPULimit)
	}
	launch := spec.Launch
	if launch == nil {
		launch = (*exec.Cmd).Start
	}
	if err := launch(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	var limit *cpuLimit
	if spec.CPULimit != 0 {
		var err error
		if limit, err = limitCPU(cmd.Process.Pid, spec.CPULimit); err != nil {
			// An unlimited process would measure something else than
			// what was asked: it does not run at all.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
	}
	go func() {
		p.waitErr = cmd.Wait()
		if limit != nil {
			// Best effort: a cgroup left behind is empty and harmless,
			// and meshperf lab clean removes it.
			_ = limit.delete()
		}
		close(p.done)
	}()
	return p, nil
}

// Name is what the process is, as Spec.Name said.
func (p *Process) Name() string { return p.spec.Name }

// PID is the process id (and its process group's id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath is the file its output goes to ("" if kept in memory).
func (p *Process) LogPath() string { return p.spec.LogPath }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns how it ended: nil for
// exit status 0, an *exec.ExitError otherwise. It may be called many times
// and concurrently.
func (p *Process) Wait() error {
	<-p.done
	return p.waitErr
}

// State is how the process ended (exit code, signal, resource usage), or
// nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Signal sends sig to the process's group: the process and whatever it
// forked. Sending to a process that has exited is an error wrapping
// os.ErrProcessDone.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("signal %s (pid %d): %w", p.spec.Name, p.PID(), os.ErrProcessDone)
	}
	if err := syscall.Kill(-p.PID(), sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %s (pid %d): %w", p.spec.Name, p.PID(), os.ErrProcessDone)
		}
		return fmt.Errorf("signal %s (pid %d): %w", p.spec.Name, p.PID(), err)
	}
	return nil
}

// Kill sends SIGKILL to the group and waits for the process to be reaped,
// as a crash would end it. It returns nil once the process is gone.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.waitGone()
}

// Stop ends the process: SIGTERM to its group, then SIGKILL after the
// grace period. It returns nil once the process is gone, however it ended;
// it is safe to call many times, concurrently, and after the process
// exited by itself.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.terminate() })
	return p.stopErr
}

func (p *Process) terminate() error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			<-p.done
			return nil
		}
		return err
	}
	grace := p.spec.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	return p.Kill()
}

func (p *Process) waitGone() error {
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d): still running %s after SIGKILL", p.spec.Name, p.PID(), killWait)
	}
}

// ExitReason waits for the process to exit and says how it ended, with the
// last line of its output: what a person needs to see why a run failed, e.g.
// `control plane (pid 4242) exited: signal: killed; last log line: ...`.
func (p *Process) ExitReason() string {
	status := "exit status 0"
	if err := p.Wait(); err != nil {
		status = err.Error()
	}
	msg := fmt.Sprintf("%s (pid %d) exited: %s", p.spec.Name, p.PID(), status)
	if line := p.LastLine(); line != "" {
		msg += "; last log line: " + line
	}
	return msg
}

// Tail is the end of the process's output, at most 64 KiB of it.
func (p *Process) Tail() string {
	if p.out != nil {
		return p.out.String()
	}
	return fileTail(p.spec.LogPath)
}

// LastLine is the last non-empty line of the process's output, cut at 300
// bytes.
func (p *Process) LastLine() string { return lastLine(p.Tail()) }

// WaitReady polls the Spec's ReadyFile until the process has written it and
// returns what it says. It fails at once, with the exit reason, if the
// process exits first, and when ctx ends or timeout (if positive) passes.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) (Ready, error) {
	if p.spec.ReadyFile == "" {
		return Ready{}, fmt.Errorf("%s: no ready file to wait for", p.spec.Name)
	}
	var r Ready
	err := p.Poll(ctx, timeout, "write its ready file "+p.spec.ReadyFile, func() (bool, error) {
		var err error
		r, err = ReadReady(p.spec.ReadyFile)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	})
	return r, err
}

// pollInterval is how often Poll looks: a start-up
// takes tens of milliseconds, and a tighter loop would only take CPU from
// the process being waited for.
const pollInterval = 10 * time.Millisecond

// Poll calls check until it reports done or fails, the process exits (the
// error is its ExitReason), ctx ends or timeout (if positive) passes; what
// names the awaited event in errors. A check that should be retried on
// failure returns (false, nil) and keeps its last error itself.
func (p *Process) Poll(ctx context.Context, timeout time.Duration, what string, check func() (bool, error)) error {
	return p.PollEvery(ctx, pollInterval, timeout, what, check)
}

// PollEvery is Poll with checks at most every interval: for a check that
// costs more than a read (a subprocess, a TLS handshake), which every
// pollInterval would take the CPU from the process coming up.
func (p *Process) PollEvery(ctx context.Context, interval, timeout time.Duration, what string, check func() (bool, error)) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := check()
		if err != nil {
			return fmt.Errorf("%s (pid %d): %w", p.spec.Name, p.PID(), err)
		}
		if ok {
			return nil
		}
		select {
		case <-p.done:
			// It may have finished its work just before exiting.
			if ok, err := check(); ok && err == nil {
				return nil
			}
			return errors.New(p.ExitReason())
		case <-ctx.Done():
			where := ""
			if p.spec.LogPath != "" {
				where = " (log: " + p.spec.LogPath + ")"
			}
			if timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s (pid %d) did not %s within %s%s", p.spec.Name, p.PID(), what, timeout, where)
			}
			return fmt.Errorf("%s (pid %d) did not %s: %w%s", p.spec.Name, p.PID(), what, ctx.Err(), where)
		case <-tick.C:
		}
	}
}
