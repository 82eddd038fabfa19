package proc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"syscall"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// CPU limits are what a container's resources.limits.cpu sets (and Istio's
// sidecar.istio.io/proxyCPULimit for the sidecar): a CFS bandwidth quota
// of limit × period CPU time per period, in a cgroup of the process's own.
// containerd's cgroups library does the writing for cgroup v1 (the cpu
// controller's hierarchy) and v2 alike, as the kubelet's runtime does.

// cpuPeriodMicros is the CFS period, the kubelet's default (100 ms).
const cpuPeriodMicros = 100_000

// CgroupParent is the cgroup under which each CPU-limited process gets its
// own, named by its pid; `meshperf lab clean` removes what is left there.
const CgroupParent = "/meshperf"

// cpuLimit is a process's CPU cgroup: what removes it once the process is
// gone.
type cpuLimit struct {
	delete func() error
}

// limitCPU puts pid into a new cgroup whose CPU bandwidth is cores CPUs.
func limitCPU(pid int, cores float64) (*cpuLimit, error) {
	quota := int64(math.Round(cores * cpuPeriodMicros))
	period := uint64(cpuPeriodMicros)
	group := CgroupParent + "/" + strconv.Itoa(pid)
	if cgroups.Mode() == cgroups.Unified {
		m, err := cgroup2.NewManager("/sys/fs/cgroup", group, &cgroup2.Resources{
			CPU: &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}})
		if err != nil {
			return nil, fmt.Errorf("CPU limit: cgroup %s: %w", group, err)
		}
		if err := m.AddProc(uint64(pid)); err != nil {
			return nil, errors.Join(fmt.Errorf("CPU limit: cgroup %s: %w", group, err), m.Delete())
		}
		return &cpuLimit{delete: m.Delete}, nil
	}
	// cgroup v1, or a hybrid host whose v2 hierarchy has no controllers:
	// the cpu controller's own hierarchy, and only it.
	c, err := cgroup1.New(cgroup1.StaticPath(group), &specs.LinuxResources{CPU: &specs.LinuxCPU{Quota: &quota, Period: &period}},
		cgroup1.WithHierarchy(cgroup1.SingleSubsystem(cgroup1.Default, cgroup1.Cpu)))
	if err != nil {
		return nil, fmt.Errorf("CPU limit: cgroup %s: %w", group, err)
	}
	if err := c.AddProc(uint64(pid)); err != nil {
		return nil, errors.Join(fmt.Errorf("CPU limit: cgroup %s: %w", group, err), c.Delete())
	}
	return &cpuLimit{delete: c.Delete}, nil
}

// CleanCgroups removes the CPU-limit cgroups left under CgroupParent by
// processes that are gone (an interrupted lab), returning their names;
// those still holding a process stay.
func CleanCgroups() ([]string, error) {
	root := "/sys/fs/cgroup" + CgroupParent
	if cgroups.Mode() != cgroups.Unified {
		root = "/sys/fs/cgroup/cpu" + CgroupParent
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CPU-limit cgroups: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		// A cgroup directory is removed with rmdir, which fails with
		// EBUSY while a process is still in it: a running lab's, kept.
		if err := os.Remove(root + "/" + e.Name()); err != nil {
			if !errors.Is(err, syscall.EBUSY) {
				errs = append(errs, err)
			}
			continue
		}
		removed = append(removed, CgroupParent+"/"+e.Name())
	}
	return removed, errors.Join(errs...)
}
