package cluster_test

// Up must not clobber what exists, and Down must remove exactly what the
// cluster made. Run holding the lab's lock, as cluster_test.go says.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/testutil"
)

// upRefused runs Up, which must fail before changing anything, with an
// error containing want: no state directory, the host as it was.
func upRefused(t *testing.T, stateDir, want string) {
	t.Helper()
	before, err := cluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Up(context.Background(), cluster.Options{StateDir: stateDir, Wait: time.Minute, Executable: testutil.MeshperfBinary(t)})
	if err == nil {
		// Up was not refused: leave the host as the test found it.
		if _, derr := cluster.Down(context.Background(), stateDir, nil); derr != nil {
			t.Errorf("down: %v", derr)
		}
		t.Fatalf("up succeeded, want it refused with %q", want)
	}
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("up: %v, want one line saying %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up left a state file: %v", err)
	}
	after, err := cluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d := cluster.Diff(before, after); len(d) > 0 {
		t.Errorf("the refused up changed the host:\n%s", strings.Join(d, "\n"))
	}
}

// A bridge of the cluster's name that is someone else's: Down would
// delete it, so Up refuses, and the bridge stays.
func TestUpRefusesAnExistingBridge(t *testing.T) {
	needCluster(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: cluster.Bridge}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatalf("create the host's %s: %v", cluster.Bridge, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(br) })
	upRefused(t, filepath.Join(t.TempDir(), "cluster"), "link "+cluster.Bridge)
	if _, err := netlink.LinkByName(cluster.Bridge); err != nil {
		t.Errorf("the host's bridge is gone: %v", err)
	}
}

// The node address on the host already (another party's): refused.
func TestUpRefusesAnExistingNodeAddress(t *testing.T) {
	needCluster(t)
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr(cluster.NodeIP + "/32")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(lo, addr); err != nil {
		t.Fatalf("add the host's %s: %v", cluster.NodeIP, err)
	}
	t.Cleanup(func() { _ = netlink.AddrDel(lo, addr) })
	upRefused(t, filepath.Join(t.TempDir(), "cluster"), "address lo "+cluster.NodeIP)
}

// The cluster's cgroup exists already (another cluster's, or left by a
// crash): Down would kill what is in it, so Up refuses.
func TestUpRefusesAnExistingClusterCgroup(t *testing.T) {
	needCluster(t)
	dir := filepath.Join("/sys/fs/cgroup/pids", cluster.CgroupName)
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		dir = filepath.Join("/sys/fs/cgroup", cluster.CgroupName) // cgroup v2
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(dir) })
	upRefused(t, filepath.Join(t.TempDir(), "cluster"), "cgroup "+dir)
}

// A host kube-proxy's chains: the cluster's kube-proxy deletes every
// KUBE-SEP-* chain it does not know, as stale, so Up refuses.
func TestUpRefusesAKubeProxysChains(t *testing.T) {
	needCluster(t)
	chain := "KUBE-SEP-MESHPERFHOSTTEST"
	if out, err := exec.Command("iptables", "-w", "-t", "nat", "-N", chain).CombinedOutput(); err != nil {
		t.Fatalf("iptables -N %s: %v: %s", chain, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("iptables", "-w", "-t", "nat", "-X", chain).Run() })
	upRefused(t, filepath.Join(t.TempDir(), "cluster"), "iptables chains KUBE-*")
	if err := exec.Command("iptables", "-w", "-t", "nat", "-L", chain, "-n").Run(); err != nil {
		t.Errorf("the host's chain %s is gone: %v", chain, err)
	}
}

// Two ups (or an up and a down) at once: the second is refused while the
// first holds the state directory, and leaves it to the first.
func TestSecondUpOrDownAtOnceIsRefused(t *testing.T) {
	needCluster(t)
	stateDir := filepath.Join(t.TempDir(), "cluster")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// What an up holds from creating the state directory to its end.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	upRefused(t, stateDir, "another `meshperf cluster up` or `down` is working on "+stateDir)
	if _, err := os.Stat(stateDir); err != nil {
		t.Errorf("the refused up removed the first one's state directory: %v", err)
	}
	// A down while an up is still at work: the state file exists already.
	if err := os.WriteFile(filepath.Join(stateDir, "state.json"), []byte(`{"processes": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Down(context.Background(), stateDir, nil)
	if err == nil || !strings.Contains(err.Error(), "another `meshperf cluster up` or `down`") {
		t.Errorf("down: %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.json")); err != nil {
		t.Errorf("the refused down removed the state file: %v", err)
	}
}

// hostItems are what another party (a host's kubelet, CNI or runtime) may
// make while the cluster runs, of the kinds and names Down once removed:
// each must survive down.
type hostItems struct {
	cgroup string // a kubepods cgroup at the top, made while the cluster runs
	netns  string // a CNI-named network namespace, made while it runs
	mount  string // a mount under the runc root's default, made while it runs
	// A link among the kubelet's container log links, to elsewhere than
	// the cluster's state, made while it runs; and whether its directory
	// is new since up (then it stays, and differs, for the link).
	logLink      string
	logDirWasNew bool
	// The shims' sockets before up: containerd 1.6 puts them outside the
	// state directory, and down removes the cluster's.
	shimSockets []string
}

func shimSockets(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/run/containerd/s")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// makeHostItemsBeforeUp makes runc's default root directory, as a host's
// runtime has it, and lists the shims' sockets.
func makeHostItemsBeforeUp(t *testing.T) *hostItems {
	t.Helper()
	h := &hostItems{mount: "/run/runc/" + hostItemName, shimSockets: shimSockets(t), logLink: "/var/log/containers/" + hostItemName + ".log"}
	if _, err := os.Stat(filepath.Dir(h.logLink)); errors.Is(err, os.ErrNotExist) {
		h.logDirWasNew = true
		t.Cleanup(func() { _ = os.Remove(filepath.Dir(h.logLink)) })
	}
	if _, err := os.Stat(filepath.Dir(h.mount)); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(h.mount), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(filepath.Dir(h.mount)) })
	}
	return h
}

// makeHostRuntimeItems makes the rest while the cluster runs.
func (h *hostItems) makeHostRuntimeItems(t *testing.T) {
	t.Helper()
	h.cgroup = "/sys/fs/cgroup/pids/kubepods-" + hostItemName
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		h.cgroup = "/sys/fs/cgroup/kubepods-" + hostItemName
	}
	if err := os.Mkdir(h.cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(h.cgroup) })
	h.netns = "cni-" + hostItemName
	if out, err := exec.Command("ip", "netns", "add", h.netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.netns).Run() })
	if err := os.Mkdir(h.mount, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", h.mount, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Unmount(h.mount, syscall.MNT_DETACH)
		_ = os.Remove(h.mount)
	})
	if err := os.Symlink("/dev/null", h.logLink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(h.logLink) })
}

// hostItemName is in every name of hostItems': how the differences they
// make are told from the cluster's.
const hostItemName = "meshperf-host-test"

// theirs says whether a difference Down found is one of the host items'.
func (h *hostItems) theirs(difference string) bool {
	return strings.Contains(difference, hostItemName) ||
		h.logDirWasNew && difference == "directory is new: "+filepath.Dir(h.logLink)
}

// checkSurvived says which of the host's items Down removed.
func (h *hostItems) checkSurvived(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(h.cgroup); err != nil {
		t.Errorf("the host's cgroup %s is gone: %v", h.cgroup, err)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", h.netns)); err != nil {
		t.Errorf("the host's network namespace %s is gone: %v", h.netns, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mounts), " "+h.mount+" ") {
		t.Errorf("the host's mount %s is gone", h.mount)
	}
	if _, err := os.Lstat(h.logLink); err != nil {
		t.Errorf("the host's log link %s is gone: %v", h.logLink, err)
	}
	for _, s := range shimSockets(t) {
		if !slices.Contains(h.shimSockets, s) {
			t.Errorf("a shim's socket is left: /run/containerd/s/%s", s)
		}
	}
}
