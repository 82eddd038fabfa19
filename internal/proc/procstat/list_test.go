package procstat

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

func TestParseCmdline(t *testing.T) {
	for in, want := range map[string][]string{
		"containerd-shim-runc-v2\x00-namespace\x00k8s.io\x00-address\x00/s/c.sock\x00": {"containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "/s/c.sock"},
		"sh\x00-c\x00\x00": {"sh", "-c", ""},
		"a b\x00c":         {"a b", "c"},
		"":                 nil,
		"\x00":             nil,
	} {
		if got := ParseCmdline([]byte(in)); !slices.Equal(got, want) {
			t.Errorf("ParseCmdline(%q) = %q, want %q", in, got, want)
		}
	}
}

// A started child is listed with its command line; once reaped it is gone.
func TestPIDsAndCmdlineOfAChild(t *testing.T) {
	// Two valid intervals (sleep adds them): an invalid one would make it
	// exit at once, a zombie with no command line.
	cmd := exec.Command("sleep", "30", "1")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	pid := cmd.Process.Pid
	pids, err := PIDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, pid) || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("PIDs lacks the child %d or this process %d", pid, os.Getpid())
	}
	// Start returns once the kernel has committed to the exec, which can
	// be before it has set the new command line up: read it until it is
	// there (it was once empty, without an error, on a busy machine).
	testutil.Eventually(t, 5*time.Second, func() error {
		args, err := Cmdline(pid)
		if err != nil || !slices.Equal(args, []string{"sleep", "30", "1"}) {
			return fmt.Errorf("Cmdline = %q, %v", args, err)
		}
		return nil
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := Cmdline(pid); !errors.Is(err, ErrGone) {
		t.Errorf("Cmdline of a reaped child: %v, want ErrGone", err)
	}
}
