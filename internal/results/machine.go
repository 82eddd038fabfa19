package results

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the host the runs were made on, for the report header.
type Machine struct {
	CPUs     int
	CPUModel string
	Kernel   string
}

// LocalMachine describes this host from the runtime and /proc; fields it
// cannot read stay empty.
func LocalMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	} else {
		m.Kernel = runtime.GOOS
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// String is the one-line form the report shows.
func (m Machine) String() string {
	s := ""
	if m.CPUs > 0 {
		s = plural(m.CPUs, "CPU")
	}
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.Kernel != "" {
		if s != "" {
			s += ", "
		}
		s += m.Kernel
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
