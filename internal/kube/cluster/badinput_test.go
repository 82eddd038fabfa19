package cluster_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// runMeshperf runs meshperf with args, as uid (if not nil) and with env
// added, and returns its exit status and stderr.
func runMeshperf(t *testing.T, exe string, uid *uint32, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	if uid != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: *uid, Gid: *uid}}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// A user who is not root is told so, one line, exit 2, and nothing is
// created.
func TestUpNotAsRootSaysSo(t *testing.T) {
	testenv.NeedRoot(t, "runs meshperf as another user")
	// A directory every user can read, as t.TempDir's is not.
	dir, err := os.MkdirTemp("", "meshperf-cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "meshperf")
	if out, err := exec.Command("cp", testutil.MeshperfBinary(t), exe).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	nobody := uint32(65534)
	stateDir := filepath.Join(dir, "state")
	code, stderr := runMeshperf(t, exe, &nobody, []string{"HOME=" + dir}, "cluster", "up", "--state-dir", stateDir)
	if code != 2 || !strings.Contains(stderr, "meshperf cluster up: root: ") {
		t.Errorf("exit %d, stderr %q; want 2 and a line saying root is needed", code, stderr)
	}
	if _, err := os.Stat(stateDir); err == nil {
		t.Error("up as a user created its state directory")
	}
	code, stderr = runMeshperf(t, exe, &nobody, []string{"HOME=" + dir}, "cluster", "down", "--state-dir", stateDir)
	if code != 2 || !strings.Contains(stderr, "root") {
		t.Errorf("down: exit %d, stderr %q; want 2 and root", code, stderr)
	}
}

// A missing command is named with the package that has it.
func TestUpWithoutACommandNamesItsPackage(t *testing.T) {
	testenv.NeedRoot(t, "checks what up needs as root")
	exe := testutil.MeshperfBinary(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	// etcd and containerd are in /usr/bin, which this PATH lacks (the sbin
	// directories are searched whatever PATH says).
	code, stderr := runMeshperf(t, exe, nil, []string{"PATH=/nonexistent"}, "cluster", "up", "--state-dir", stateDir)
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr %q", code, stderr)
	}
	for _, want := range []string{"etcd not found; install etcd-server", "containerd not found; install containerd"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(stateDir); err == nil {
		t.Error("up without its commands created its state directory")
	}
}

func TestBadFlags(t *testing.T) {
	exe := testutil.MeshperfBinary(t)
	for _, args := range [][]string{
		{"cluster", "up", "--wait", "0s"},
		{"cluster", "up", "--image-repo", "Not A Repo"},
		{"cluster", "up", "extra"},
		{"cluster", "nosuch"},
	} {
		code, stderr := runMeshperf(t, exe, nil, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}
