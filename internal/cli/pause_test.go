package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// startPause starts `meshperf pause` and waits for its ready file, so
// that a signal sent next is caught rather than the default action's.
func startPause(t *testing.T, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(testutil.MeshperfBinary(t), "pause", "-ready-file", ready)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := os.Stat(ready)
		return err
	})
	return cmd
}

func TestPauseExitsCleanlyOnSIGTERM(t *testing.T) {
	cmd := startPause(t, nil)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pause on SIGTERM: %v, want exit status 0", err)
	}
}

// As PID 1 of its own PID namespace, as in a pod, pause inherits the
// orphans of the namespace and must reap them, or they stay zombies.
func TestPauseReapsOrphansAsPID1(t *testing.T) {
	testenv.NeedRoot(t, "a new PID namespace")
	nsenter := testenv.NeedCommand(t, "nsenter", "util-linux")
	pause := startPause(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	pid := pause.Process.Pid
	// sh starts a sleep and exits at once: the sleep is orphaned to pause.
	// The sleep's output goes elsewhere, or reading it would wait for it.
	out, err := exec.Command(nsenter, "-t", strconv.Itoa(pid), "-p", "--", "/bin/sh", "-c", "sleep 1 >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	if kids := childrenOf(t, pid); len(kids) == 0 {
		t.Fatal("the orphaned sleep is not pause's child")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if kids := childrenOf(t, pid); len(kids) > 0 {
			return fmt.Errorf("pause still has children %v (zombies if the sleep ended)", kids)
		}
		return nil
	})
	if err := pause.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := pause.Wait(); err != nil {
		t.Fatalf("pause on SIGTERM: %v", err)
	}
}

// childrenOf lists the children of every thread of process pid: the kernel
// may hand an orphan to any thread of its reaper.
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("no /proc/%d/task/*/children: %v", pid, err)
	}
	var kids []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		kids = append(kids, strings.Fields(string(data))...)
	}
	return kids
}
