package pod

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultStopGrace is how long Stop waits between SIGTERM and SIGKILL.
const DefaultStopGrace = 3 * time.Second

// User is the identity a process runs as. Istio runs the sidecar as
// uid/gid 1337 so that capture can tell its traffic from the app's.
type User struct {
	UID, GID uint32
}

// Cmd is a process in a pod. Set the exported fields, then call Start once.
type Cmd struct {
	// Path is the program, resolved on PATH if it has no slash.
	Path string
	// Args holds the command line, including the program name as Args[0].
	Args []string
	// Env is the environment; nil means the caller's.
	Env []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Stdin feeds the process; nil means /dev/null.
	Stdin io.Reader
	// LogPath receives stdout and stderr, appended to; empty discards them.
	LogPath string
	// User runs the process as another uid/gid; nil runs it as the caller.
	User *User
	// StopGrace is how long Stop waits after SIGTERM; zero means
	// DefaultStopGrace.
	StopGrace time.Duration

	pod     *Pod
	ec      *exec.Cmd
	done    chan struct{}
	waitErr error
	stop    sync.Once
	stopErr error
}

// Start starts the process in the pod. The process is in a process group of
// its own, so a Ctrl-C on the terminal reaches only meshperf, which can then
// stop things in order instead of every process dying at once.
func (c *Cmd) Start() error {
	if c.ec != nil {
		return fmt.Errorf("pod %s: %s: already started", c.pod.name, c.Path)
	}
	if err := c.pod.checkOpen(); err != nil {
		return err
	}
	var args []string
	if len(c.Args) > 1 {
		args = c.Args[1:]
	}
	ec := exec.Command(c.Path, args...)
	if ec.Err != nil {
		return fmt.Errorf("pod %s: %w", c.pod.name, ec.Err)
	}
	if len(c.Args) > 0 {
		ec.Args = c.Args
	}
	ec.Env, ec.Dir, ec.Stdin = c.Env, c.Dir, c.Stdin
	ec.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.User != nil {
		ec.SysProcAttr.Credential = &syscall.Credential{Uid: c.User.UID, Gid: c.User.GID}
	}
	if c.LogPath != "" {
		f, err := os.OpenFile(c.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("pod %s: %s: log file: %w", c.pod.name, c.Path, err)
		}
		// The child holds its own copy of the descriptor once started.
		defer f.Close()
		ec.Stdout, ec.Stderr = f, f
	}
	if err := c.pod.startIn(ec); err != nil {
		return fmt.Errorf("pod %s: start %s: %w", c.pod.name, c.Path, err)
	}
	c.ec = ec
	go func() {
		c.waitErr = ec.Wait()
		close(c.done)
	}()
	if err := c.pod.register(c); err != nil {
		// The pod was removed while we were starting: do not leave an
		// orphan in a namespace that is going away.
		_ = c.Stop()
		return err
	}
	return nil
}

// PID is the process id, or 0 before Start.
func (c *Cmd) PID() int {
	if c.ec == nil || c.ec.Process == nil {
		return 0
	}
	return c.ec.Process.Pid
}

// Done is closed when the process has exited (and been reaped).
func (c *Cmd) Done() <-chan struct{} { return c.done }

// Wait waits for the process to exit and returns how it ended (nil for exit
// status 0, an *exec.ExitError otherwise). It may be called many times and
// concurrently.
func (c *Cmd) Wait() error {
	if c.ec == nil {
		return fmt.Errorf("%s: not started", c.Path)
	}
	<-c.done
	return c.waitErr
}

// Stop ends the process: SIGTERM to its process group, then SIGKILL after
// StopGrace. It returns nil once the process is gone, however it ended; it is
// safe to call many times and after the process exited by itself.
func (c *Cmd) Stop() error {
	if c.ec == nil {
		return nil
	}
	c.stop.Do(func() { c.stopErr = c.terminate() })
	return c.stopErr
}

func (c *Cmd) terminate() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	grace := c.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	pgid := c.ec.Process.Pid
	// Signal the group so that children the process forked go too.
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %w", c.Path, pgid, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
		return nil
	case <-timer.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pid %d): %w", c.Path, pgid, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("kill %s (pid %d): still running 5s after SIGKILL", c.Path, pgid)
	}
}
