package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
)

// SyscallEvent is the tracepoint perf counts a process's syscalls by, as
// the kernel enters them: counted in the kernel, cheap enough to leave on
// during a measurement (strace would slow every call by far more).
const SyscallEvent = "raw_syscalls:sys_enter"

// SyscallCounter is `perf stat` counting one process's syscalls (all its
// threads) from when it attached, for a window or until the process exits.
type SyscallCounter struct {
	p      *proc.Process
	out    string
	window time.Duration
}

// CountSyscalls attaches perf (its binary) to pid, writing its count to
// out: for window when it is positive (perf then ends by itself, as a
// proxy that goes on running needs), else until the process exits, which
// ends perf too (a load generator's whole run). logPath receives perf's
// own output; empty keeps it in memory.
func CountSyscalls(perf string, pid int, out string, window time.Duration, logPath string) (*SyscallCounter, error) {
	args := []string{"stat", "-x", ",", "-e", SyscallEvent, "-o", out, "-p", strconv.Itoa(pid)}
	if window > 0 {
		args = append(args, "--", "sleep", strconv.FormatFloat(window.Seconds(), 'f', 3, 64))
	}
	p, err := proc.Start(proc.Spec{Name: "perf stat", Path: perf, ParentDeathSignal: syscall.SIGKILL, Args: args, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return &SyscallCounter{p, out, window}, nil
}

// Result waits for perf to end (its window is over, or the process it
// watches has exited or is about to) and returns its count, or why there
// is none.
func (c *SyscallCounter) Result() (float64, error) {
	limit := time.NewTimer(c.window + 10*time.Second)
	defer limit.Stop()
	select {
	case <-c.p.Done():
	case <-limit.C:
		_ = c.p.Stop()
		return math.NaN(), fmt.Errorf("perf stat: still running %s after its window", 10*time.Second)
	}
	if c.window > 0 {
		if err := c.p.Wait(); err != nil {
			return math.NaN(), fmt.Errorf("perf stat: %s", c.p.ExitReason())
		}
	}
	data, err := os.ReadFile(c.out)
	if err != nil {
		return math.NaN(), fmt.Errorf("perf stat: %w", err)
	}
	return parsePerfCount(string(data), SyscallEvent)
}

// Count is Result's count, NaN when it could not count. A nil counter
// counts nothing.
func (c *SyscallCounter) Count() float64 {
	if c == nil {
		return math.NaN()
	}
	n, _ := c.Result()
	return n
}

// Stop ends perf without a count.
func (c *SyscallCounter) Stop() error { return c.p.Stop() }

// parsePerfCount reads event's count from perf stat's CSV output (-x ,):
// "COUNT,UNIT,EVENT,...", with "<not counted>" or "<not supported>" for a
// count it could not take.
func parsePerfCount(out, event string) (float64, error) {
	for line := range strings.SplitSeq(out, "\n") {
		fields := strings.Split(line, ",")
		if len(fields) < 3 || fields[2] != event {
			continue
		}
		n, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return math.NaN(), fmt.Errorf("perf stat: %s: the count is %q (are tracepoints available? run as root)", event, fields[0])
		}
		return n, nil
	}
	return math.NaN(), errors.New("perf stat: no count of " + event)
}
