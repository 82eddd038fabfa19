package results

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the host a run was made on: the report's header, and
// what decides whether two results can be compared at all.
type Machine struct {
	Hostname string `json:"hostname,omitempty"`
	CPUs     int    `json:"cpus,omitempty"`
	CPUModel string `json:"cpu_model,omitempty"`
	MemoryMB int    `json:"memory_mb,omitempty"` // total memory, MiB
	Kernel   string `json:"kernel,omitempty"`
}

// LocalMachine describes this host from the runtime and /proc; fields it
// cannot read stay empty.
func LocalMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	} else {
		m.Kernel = runtime.GOOS
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	// MemTotal is in kB (KiB).
	if f := strings.Fields(procField("/proc/meminfo", "MemTotal")); len(f) > 0 {
		if kb, err := strconv.Atoi(f[0]); err == nil {
			m.MemoryMB = kb / 1024
		}
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file
// with that key, "" if there is none.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Key names the class of machine a result is comparable within: the CPU
// model, the number of CPUs and the memory rounded to GiB. The host name
// and kernel are left out on purpose: two hosts of one kind (a CI pool)
// give comparable numbers, and a team's store should say so; a kernel
// change is a change under test like any other. "" when nothing is known
// (a result imported without its machine).
func (m Machine) Key() string {
	if m.CPUs == 0 && m.CPUModel == "" && m.MemoryMB == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%dcpu/%dGiB", m.CPUModel, m.CPUs, (m.MemoryMB+512)/1024)
}

// SameAs says whether results from m and o are comparable: both known and
// of the same Key.
func (m Machine) SameAs(o Machine) bool { return m.Key() != "" && m.Key() == o.Key() }

// String is the one-line form the report shows.
func (m Machine) String() string {
	s := ""
	if m.CPUs > 0 {
		s = plural(m.CPUs, "CPU")
	}
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.MemoryMB > 0 {
		s += fmt.Sprintf(", %.1f GiB", float64(m.MemoryMB)/1024)
	}
	if m.Kernel != "" {
		if s != "" {
			s += ", "
		}
		s += m.Kernel
	}
	return strings.TrimPrefix(s, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
