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

// SyscallCounter is `perf stat` counting one process's syscalls from when
// it attached until the process exits, which ends it too.
type SyscallCounter struct {
	p   *proc.Process
	out string
}

// CountSyscalls attaches perf (its binary) to pid, writing its count to
// out.
func CountSyscalls(perf string, pid int, out string) (*SyscallCounter, error) {
	p, err := proc.Start(proc.Spec{Name: "perf stat", Path: perf, ParentDeathSignal: syscall.SIGKILL,
		Args: []string{"stat", "-x", ",", "-e", SyscallEvent, "-o", out, "-p", strconv.Itoa(pid)}})
	if err != nil {
		return nil, err
	}
	return &SyscallCounter{p, out}, nil
}

// Count waits for perf to end (the process it watches has exited, or is
// about to) and returns its count; NaN when it could not count. A nil
// counter counts nothing.
func (c *SyscallCounter) Count() float64 {
	if c == nil {
		return math.NaN()
	}
	limit := time.NewTimer(10 * time.Second)
	defer limit.Stop()
	select {
	case <-c.p.Done():
	case <-limit.C:
		_ = c.p.Stop()
	}
	data, err := os.ReadFile(c.out)
	if err != nil {
		return math.NaN()
	}
	n, err := parsePerfCount(string(data), SyscallEvent)
	if err != nil {
		return math.NaN()
	}
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
			return math.NaN(), fmt.Errorf("perf stat: %s: %q is not a count", event, fields[0])
		}
		return n, nil
	}
	return math.NaN(), errors.New("perf stat: no count of " + event)
}
