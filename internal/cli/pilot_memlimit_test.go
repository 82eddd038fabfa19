package cli

import (
	"bytes"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// unsetEnvForTest removes name for the test and restores it after.
func unsetEnvForTest(t *testing.T, name string) {
	t.Setenv(name, "") // registers the restore
	os.Unsetenv(name)
}

func restoreMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

func TestMemoryLimitIsNineTenthsOfTheCgroups(t *testing.T) {
	restoreMemoryLimit(t)
	unsetEnvForTest(t, "GOMEMLIMIT")
	unsetEnvForTest(t, "AUTOMEMLIMIT")
	var logged bytes.Buffer
	const cgroup = 1000 << 20
	got := setMemoryLimit(slog.New(slog.NewTextHandler(&logged, nil)), memlimit.Limit(cgroup))
	if want := int64(cgroup * 9 / 10); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("limit = %d, runtime's %d; want %d (0.9 of the cgroup's)", got, debug.SetMemoryLimit(-1), want)
	}
	if !strings.Contains(logged.String(), "GOMEMLIMIT=943718400") {
		t.Errorf("log = %q, want the limit chosen", logged.String())
	}
}

func TestMemoryLimitFromTheUserIsKept(t *testing.T) {
	restoreMemoryLimit(t)
	const users = 123 << 20
	debug.SetMemoryLimit(users) // what the runtime read from GOMEMLIMIT at start
	t.Setenv("GOMEMLIMIT", "123MiB")
	var logged bytes.Buffer
	got := setMemoryLimit(slog.New(slog.NewTextHandler(&logged, nil)), memlimit.Limit(1000<<20))
	if got != users || debug.SetMemoryLimit(-1) != users {
		t.Errorf("limit = %d, runtime's %d; want the user's %d untouched", got, debug.SetMemoryLimit(-1), users)
	}
	if !strings.Contains(logged.String(), "GOMEMLIMIT=123MiB") {
		t.Errorf("log = %q, want the user's GOMEMLIMIT", logged.String())
	}
}

func TestNoCgroupLeavesNoMemoryLimit(t *testing.T) {
	restoreMemoryLimit(t)
	unsetEnvForTest(t, "GOMEMLIMIT")
	unsetEnvForTest(t, "AUTOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	var logged bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&logged, nil)), func() (uint64, error) { return 0, memlimit.ErrNoCgroup })
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("runtime's limit = %d, want %d unchanged", got, before)
	}
	if !strings.Contains(logged.String(), "no memory limit") {
		t.Errorf("log = %q, want it to say there is none", logged.String())
	}
}

func TestAutoMemLimitOffLeavesNoMemoryLimit(t *testing.T) {
	restoreMemoryLimit(t)
	unsetEnvForTest(t, "GOMEMLIMIT")
	t.Setenv("AUTOMEMLIMIT", "off")
	before := debug.SetMemoryLimit(-1)
	var logged bytes.Buffer
	got := setMemoryLimit(slog.New(slog.NewTextHandler(&logged, nil)), memlimit.Limit(1000<<20))
	if got != before || debug.SetMemoryLimit(-1) != before {
		t.Errorf("limit = %d, runtime's %d; want %d unchanged", got, debug.SetMemoryLimit(-1), before)
	}
	if !strings.Contains(logged.String(), "no memory limit: AUTOMEMLIMIT=off") {
		t.Errorf("log = %q, want it to say AUTOMEMLIMIT=off left no limit", logged.String())
	}
}

func TestAutoMemLimitRatioIsTheOneLogged(t *testing.T) {
	restoreMemoryLimit(t)
	unsetEnvForTest(t, "GOMEMLIMIT")
	t.Setenv("AUTOMEMLIMIT", "0.5")
	var logged bytes.Buffer
	const cgroup = 1000 << 20
	if got, want := setMemoryLimit(slog.New(slog.NewTextHandler(&logged, nil)), memlimit.Limit(cgroup)), int64(cgroup/2); got != want {
		t.Errorf("limit = %d, want %d (AUTOMEMLIMIT's half of the cgroup's)", got, want)
	}
	if !strings.Contains(logged.String(), "ratio=0.5") {
		t.Errorf("log = %q, want the ratio in force", logged.String())
	}
}
