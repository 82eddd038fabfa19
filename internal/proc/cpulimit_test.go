package proc_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
)

// cpuCgroupDir is where the process's CPU cgroup is in the hierarchy that
// holds the cpu controller, read from /proc/PID/cgroup.
func cpuCgroupDir(t *testing.T, pid int) (dir string, v2 bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				return filepath.Join("/sys/fs/cgroup/cpu", parts[2]), false
			}
		}
		if parts[0] == "0" {
			unified = parts[2]
		}
	}
	return filepath.Join("/sys/fs/cgroup", unified), true
}

func TestCPULimitPutsTheProcessInAQuotaCgroupAndRemovesIt(t *testing.T) {
	testenv.NeedRoot(t, "a CPU limit is a cgroup quota")
	p, err := proc.Start(proc.Spec{Name: "sleeper", Path: "sleep", Args: []string{"30"}, CPULimit: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	dir, v2 := cpuCgroupDir(t, p.PID())
	if want := proc.CgroupParent + "/" + strconv.Itoa(p.PID()); !strings.HasSuffix(dir, want) {
		t.Fatalf("process is in cgroup %s, want one ending %s", dir, want)
	}
	if v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil || strings.TrimSpace(string(b)) != "25000 100000" {
			t.Errorf("cpu.max = %q (%v), want 25000 100000", b, err)
		}
	} else {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
		if err != nil || strings.TrimSpace(string(b)) != "25000" {
			t.Errorf("cpu.cfs_quota_us = %q (%v), want 25000", b, err)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	// The cgroup goes once the process is reaped; Stop returns after that.
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup %s still there after the process ended", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCPULimitThatCannotBeSetDoesNotStartTheProcess(t *testing.T) {
	_, err := proc.Start(proc.Spec{Name: "sleeper", Path: "sleep", Args: []string{"30"}, CPULimit: -1})
	if err == nil || !strings.Contains(err.Error(), "CPU limit must be above 0") {
		t.Fatalf("Start with CPULimit -1 = %v, want the limit refused", err)
	}
}
