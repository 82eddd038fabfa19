// Package procstat measures what a process costs — CPU time and resident
// memory — from /proc, the way the lab charges each sidecar, app and load
// generator over a run's steady window. It reads only /proc files, so it
// works for any process on the machine, including ones in other network
// namespaces, and needs root only for other users' PSS.
package procstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrGone is returned for a process that has exited (or is a zombie).
var ErrGone = errors.New("process has exited")

// Sample is one reading of a process.
type Sample struct {
	PID   int
	Name  string // the kernel's comm: at most 15 bytes of the program name
	State byte   // R, S, D, Z, …
	// StartTicks is when the process started, in clock ticks since boot; with
	// PID it identifies the process even if the pid is reused later.
	StartTicks uint64
	CPU        time.Duration // user + system time used so far
	UserCPU    time.Duration // of which in user space (utime)
	SystemCPU  time.Duration // and in the kernel on its behalf (stime)
	// VoluntarySwitches and InvoluntarySwitches are the context switches of
	// all its threads so far (a thread that blocked, one that the scheduler
	// preempted): a proxy's wake-ups per request; valid if SwitchesKnown.
	VoluntarySwitches   uint64
	InvoluntarySwitches uint64
	SwitchesKnown       bool
	RSS                 uint64    // resident set size, bytes (VmRSS)
	HWM                 uint64    // peak RSS, bytes (VmHWM)
	PSS                 uint64    // proportional set size, bytes; valid if PSSKnown
	PSSKnown            bool      // false if smaps_rollup was unreadable
	At                  time.Time // when the sample was taken; carries the monotonic clock
}

// Read samples process pid using the system's clock tick.
func Read(pid int) (Sample, error) {
	return ReadWithTicks(pid, ClockTicks())
}

// ReadWithTicks samples process pid, converting CPU ticks with ticksPerSec.
func ReadWithTicks(pid int, ticksPerSec int64) (Sample, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	at := time.Now()
	statText, err := os.ReadFile(dir + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Sample{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return Sample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	st, err := ParseStat(statText)
	if err != nil {
		return Sample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if st.State == 'Z' || st.State == 'X' {
		return Sample{}, fmt.Errorf("pid %d (%s): %w", pid, st.Name, ErrGone)
	}
	s := Sample{
		PID:        pid,
		Name:       st.Name,
		State:      st.State,
		StartTicks: st.StartTicks,
		CPU:        ticksToDuration(st.UserTicks+st.SystemTicks, ticksPerSec),
		UserCPU:    ticksToDuration(st.UserTicks, ticksPerSec),
		SystemCPU:  ticksToDuration(st.SystemTicks, ticksPerSec),
		At:         at,
	}
	statusText, err := os.ReadFile(dir + "/status")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Sample{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return Sample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	mem, err := ParseStatus(statusText)
	if err != nil {
		return Sample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	s.RSS, s.HWM = mem.RSS, mem.HWM
	s.VoluntarySwitches, s.InvoluntarySwitches, s.SwitchesKnown = threadSwitches(dir)
	// smaps_rollup walks the page tables, which is why PSS is worth having
	// (shared pages are split among their users) and also why it can be
	// missing: old kernels lack it and other users' processes need ptrace
	// rights. CPU and RSS are still good without it.
	if rollup, err := os.ReadFile(dir + "/smaps_rollup"); err == nil {
		if pss, ok, err := ParseSmapsRollup(rollup); err == nil && ok {
			s.PSS, s.PSSKnown = pss, true
		}
	}
	return s, nil
}

func ticksToDuration(ticks uint64, perSec int64) time.Duration {
	if perSec <= 0 {
		perSec = DefaultClockTicks
	}
	sec := ticks / uint64(perSec)
	rem := ticks % uint64(perSec)
	return time.Duration(sec)*time.Second + time.Duration(rem)*time.Second/time.Duration(perSec)
}

// StatFields are the parts of /proc/PID/stat that Sample uses.
type StatFields struct {
	Name        string
	State       byte
	UserTicks   uint64 // utime, field 14
	SystemTicks uint64 // stime, field 15
	StartTicks  uint64 // starttime, field 22
}

// ParseStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so the fields
// are counted from the last ')'.
func ParseStat(text []byte) (StatFields, error) {
	open := bytes.IndexByte(text, '(')
	end := bytes.LastIndexByte(text, ')')
	if open < 0 || end < open {
		return StatFields{}, errors.New("/proc stat: no (command name)")
	}
	f := StatFields{Name: string(text[open+1 : end])}
	rest := strings.Fields(string(text[end+1:]))
	// rest[0] is field 3 (state); field n is rest[n-3].
	if len(rest) < 20 {
		return StatFields{}, fmt.Errorf("/proc stat: %d fields after the command name, want at least 20", len(rest))
	}
	if len(rest[0]) != 1 || !isLetter(rest[0][0]) {
		return StatFields{}, fmt.Errorf("/proc stat: state %q is not one letter", rest[0])
	}
	f.State = rest[0][0]
	var err error
	if f.UserTicks, err = strconv.ParseUint(rest[11], 10, 64); err != nil {
		return StatFields{}, fmt.Errorf("/proc stat: utime: %w", err)
	}
	if f.SystemTicks, err = strconv.ParseUint(rest[12], 10, 64); err != nil {
		return StatFields{}, fmt.Errorf("/proc stat: stime: %w", err)
	}
	if f.StartTicks, err = strconv.ParseUint(rest[19], 10, 64); err != nil {
		return StatFields{}, fmt.Errorf("/proc stat: starttime: %w", err)
	}
	return f, nil
}

func isLetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// StatusMemory holds the memory lines of /proc/PID/status, in bytes, and
// its context-switch counts.
type StatusMemory struct {
	RSS uint64 // VmRSS
	HWM uint64 // VmHWM
	// The thread's context switches (voluntary_ctxt_switches,
	// nonvoluntary_ctxt_switches): /proc/PID/status counts the main thread
	// only, /proc/PID/task/TID/status each thread.
	VoluntarySwitches, InvoluntarySwitches uint64
}

// threadSwitches sums the context switches of every thread of the process
// in dir. A proxy's workers are threads, and the process's own status line
// counts only its main thread, which sleeps. Threads that exited are lost
// from the sum, so the counts are for processes whose threads live as long
// as they do (a proxy's workers); ok is false when no task was readable.
func threadSwitches(dir string) (voluntary, involuntary uint64, ok bool) {
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return 0, 0, false
	}
	for _, t := range tasks {
		text, err := os.ReadFile(dir + "/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		st, err := ParseStatus(text)
		if err != nil {
			continue
		}
		voluntary += st.VoluntarySwitches
		involuntary += st.InvoluntarySwitches
		ok = true
	}
	return voluntary, involuntary, ok
}

// ParseStatus parses /proc/PID/status. Kernel threads have no Vm lines and
// get zeros.
func ParseStatus(text []byte) (StatusMemory, error) {
	var m StatusMemory
	for line := range strings.SplitSeq(string(text), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch key {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
			if err != nil {
				return StatusMemory{}, fmt.Errorf("/proc status: %s: %w", key, err)
			}
			if key == "voluntary_ctxt_switches" {
				m.VoluntarySwitches = n
			} else {
				m.InvoluntarySwitches = n
			}
			continue
		default:
			continue
		}
		n, err := parseKB(value)
		if err != nil {
			return StatusMemory{}, fmt.Errorf("/proc status: %s: %w", key, err)
		}
		*dst = n
	}
	return m, nil
}

// ParseSmapsRollup returns the Pss line of /proc/PID/smaps_rollup in bytes;
// ok is false if there is none.
func ParseSmapsRollup(text []byte) (pss uint64, ok bool, err error) {
	for line := range strings.SplitSeq(string(text), "\n") {
		key, value, found := strings.Cut(line, ":")
		if !found || key != "Pss" {
			continue
		}
		n, err := parseKB(value)
		if err != nil {
			return 0, false, fmt.Errorf("/proc smaps_rollup: Pss: %w", err)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// parseKB parses "   1234 kB" into bytes.
func parseKB(s string) (uint64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), " ")
	if strings.TrimSpace(unit) != "kB" {
		return 0, fmt.Errorf("%q: want a number of kB", strings.TrimSpace(s))
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", strings.TrimSpace(s), err)
	}
	if n > (1<<64-1)/1024 {
		return 0, fmt.Errorf("%q: too large", strings.TrimSpace(s))
	}
	return n * 1024, nil
}

// DefaultClockTicks is Linux's USER_HZ, the unit of the CPU times in
// /proc/PID/stat. It is 100 on every architecture Go runs Linux on; the
// kernel scales from its internal HZ, so it does not vary with CONFIG_HZ.
const DefaultClockTicks = 100

// atClkTck is the auxiliary vector entry that carries USER_HZ.
const atClkTck = 17

// ClockTicks returns the clock tick the kernel uses in /proc: the AT_CLKTCK
// entry of this process's auxiliary vector (where C's
// sysconf(_SC_CLK_TCK) gets it, without cgo), or DefaultClockTicks if that
// cannot be read or looks wrong.
func ClockTicks() int64 {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return DefaultClockTicks
	}
	if v, ok := clockTicksFromAuxv(auxv); ok {
		return v
	}
	return DefaultClockTicks
}

// clockTicksFromAuxv finds AT_CLKTCK in an auxiliary vector of native-endian
// 64-bit (key, value) pairs.
func clockTicksFromAuxv(auxv []byte) (int64, bool) {
	if strconv.IntSize != 64 { // 32-bit vectors have 32-bit words
		return 0, false
	}
	for i := 0; i+16 <= len(auxv); i += 16 {
		key := binary.NativeEndian.Uint64(auxv[i:])
		val := binary.NativeEndian.Uint64(auxv[i+8:])
		if key == 0 { // AT_NULL ends the vector
			break
		}
		if key == atClkTck {
			if val == 0 || val > 100000 {
				return 0, false
			}
			return int64(val), true
		}
	}
	return 0, false
}
