package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/proc/procstat"
)

// Record identifies a detached process (Spec.Detached) across meshperf
// invocations: its pid, and its start time so that a pid the kernel has
// since given to another program is never signalled.
type Record struct {
	Name       string `json:"name"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

// Record is the process's Record, to keep in a state file.
func (p *Process) Record() (Record, error) {
	s, err := procstat.Read(p.PID())
	if err != nil {
		return Record{}, fmt.Errorf("%s: %w", p.spec.Name, err)
	}
	return Record{Name: p.spec.Name, PID: p.PID(), StartTicks: s.StartTicks}, nil
}

// Alive reports whether the recorded process still runs (a zombie does
// not).
func (r Record) Alive() bool {
	s, err := procstat.Read(r.PID)
	return err == nil && s.StartTicks == r.StartTicks
}

// recordPoll is how often Stop looks whether the process has gone: it is
// not meshperf's child, so there is nothing to wait on.
const recordPoll = 20 * time.Millisecond

// Stop ends the recorded process as Process.Stop does: SIGTERM to its
// group, SIGKILL after grace (zero means DefaultStopGrace). A process that
// is gone, or whose pid now belongs to another program, is left alone.
func (r Record) Stop(grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, grace}, {syscall.SIGKILL, killWait}} {
		if !r.Alive() {
			return nil
		}
		if err := syscall.Kill(-r.PID, step.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %s (pid %d): %w", r.Name, r.PID, err)
		}
		for deadline := time.Now().Add(step.wait); time.Now().Before(deadline); time.Sleep(recordPoll) {
			if !r.Alive() {
				return nil
			}
		}
	}
	return fmt.Errorf("%s (pid %d): still running %s after SIGKILL: %w", r.Name, r.PID, killWait, os.ErrDeadlineExceeded)
}
