package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a running program the lab watches: a pod's command or a host
// process (the control plane), with the log it writes to.
type process interface {
	PID() int
	Done() <-chan struct{}
	Wait() error
	Stop() error
}

// watched names a process for failure reasons and sampling.
type watched struct {
	role string // e.g. "server sidecar", "control plane"
	proc process
	log  string
}

// alive reports whether the process has not exited.
func (w *watched) alive() bool {
	if w == nil || w.proc == nil {
		return false
	}
	select {
	case <-w.proc.Done():
		return false
	default:
		return true
	}
}

// exitReason says how a process ended, with the last line of its log: what a
// person needs to see why a run failed.
func (w *watched) exitReason() string {
	err := w.proc.Wait()
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	msg := fmt.Sprintf("%s (pid %d) exited: %s", w.role, w.proc.PID(), status)
	if line := lastLine(w.log); line != "" {
		msg += "; last log line: " + line
	}
	return msg
}

// lastLine is the last non-empty line of a file, at most 300 bytes of it.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 4096
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		_, _ = f.Seek(st.Size()-tail, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) > 300 {
		line = line[:300] + "..."
	}
	return line
}

// hostCmd is a process in the host's namespace, in a process group of its
// own so that a terminal's Ctrl-C reaches only meshperf, which stops things
// in order.
type hostCmd struct {
	ec      *exec.Cmd
	done    chan struct{}
	waitErr error
}

func startHost(path string, args []string, logPath string) (*hostCmd, error) {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	defer f.Close()
	ec := exec.Command(path, args...)
	ec.Stdout, ec.Stderr = f, f
	ec.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ec.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	c := &hostCmd{ec: ec, done: make(chan struct{})}
	go func() {
		c.waitErr = ec.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *hostCmd) PID() int              { return c.ec.Process.Pid }
func (c *hostCmd) Done() <-chan struct{} { return c.done }
func (c *hostCmd) Wait() error           { <-c.done; return c.waitErr }

// Stop sends SIGTERM to the group, then SIGKILL after 3 s.
func (c *hostCmd) Stop() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	pid := c.ec.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(3 * time.Second):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-c.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("pid %d still running 5s after SIGKILL", pid)
	}
}

// runTool runs a short meshperf command (apply, delete) to completion and
// returns its output in the error when it fails.
func runTool(bin string, args ...string) error {
	var out bytes.Buffer
	ec := exec.Command(bin, args...)
	ec.Stdout, ec.Stderr = &out, &out
	if err := ec.Run(); err != nil {
		return fmt.Errorf("meshperf %s: %w: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}
