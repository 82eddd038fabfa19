package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// PIDs lists the processes on the machine (of this pid namespace), for a
// caller that must find processes by what they are rather than by a pid it
// was given.
func PIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Cmdline is the process's command line, program first; ErrGone for a
// process that has exited, and none for a zombie or a kernel thread.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return ParseCmdline(b), nil
}

// ParseCmdline splits /proc/PID/cmdline: NUL-terminated arguments, of
// which the last may be empty.
func ParseCmdline(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil
	}
	var args []string
	for a := range bytes.SplitSeq(b, []byte{0}) {
		args = append(args, string(a))
	}
	return args
}
