package perfcheck

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// Machine is where a baseline was measured: what decides whether two sets of
// micro-benchmark figures can be compared at all. It mirrors the results
// package's machine description (CPU model, cores, memory, kernel) with the
// same comparability key, so that perfcheck and the run store call the same
// machines "the same".
type Machine struct {
	CPUModel string `json:"cpu"`
	CPUs     int    `json:"cores"`
	MemoryMB int    `json:"memory_mb"`
	Kernel   string `json:"kernel"`
}

// LocalMachine describes this host: CPU model, cores and kernel as
// results.LocalMachine reads them, and the memory from /proc/meminfo.
func LocalMachine() Machine {
	m := results.LocalMachine()
	return Machine{CPUModel: m.CPUModel, CPUs: m.CPUs, MemoryMB: memoryMB(), Kernel: m.Kernel}
}

// memoryMB is MemTotal in MiB, 0 when /proc/meminfo cannot be read.
func memoryMB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

// Key identifies the machine class: CPU model, cores, and memory rounded to
// GiB (MemTotal varies by a few MiB between boots of the same machine). The
// kernel is left out: it does not change what a benchmark measures enough to
// make figures incomparable, and it is shown beside the key.
func (m Machine) Key() string {
	return fmt.Sprintf("%s, %d cores, %d GiB", m.CPUModel, m.CPUs, (m.MemoryMB+512)/1024)
}

// String is the key with the kernel, for the line that says two machines
// differ.
func (m Machine) String() string {
	if m.Kernel == "" {
		return m.Key()
	}
	return m.Key() + ", " + m.Kernel
}

// acrossMachines is the line perfcheck prints when a baseline was measured
// on another machine than this one, or "" when the keys match.
func acrossMachines(what string, baseline, current Machine) string {
	if baseline.Key() == current.Key() {
		return ""
	}
	return fmt.Sprintf("compared across machines: %s was measured on %s, this machine is %s", what, baseline, current)
}
