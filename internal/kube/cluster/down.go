package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/proc/procstat"
)

// DownResult says what Down found.
type DownResult struct {
	// Differences are how the host still differs from before Up, one line
	// each; none when it is as it was.
	Differences []string
}

// Down tears down the cluster in stateDir, from its state file alone, so
// that it works after a crash or a killed `up`, and then compares the host
// with what Up recorded. Without a cluster the error matches IsNoCluster.
func Down(ctx context.Context, stateDir string, progress io.Writer) (DownResult, error) {
	if os.Geteuid() != 0 {
		return DownResult{}, &MissingError{Lines: []string{"root: tearing the cluster down removes addresses, routes, iptables chains, cgroups and mounts (run as root)"}}
	}
	if _, err := loadState(stateDir); err != nil {
		return DownResult{}, err
	}
	// Not while an up is still bringing this cluster up: it would go on
	// starting what this removes.
	unlock, err := lockStateDir(stateDir)
	if err != nil {
		return DownResult{}, err
	}
	defer unlock()
	s, err := loadState(stateDir)
	if err != nil {
		return DownResult{}, err
	}
	return teardown(ctx, s, progress)
}

// podDeleteWait bounds the wait for the kubelet to stop the pods (and run
// CNI DEL for each) once they are deleted through the API.
const podDeleteWait = 30 * time.Second

// teardown undoes everything s records, in the reverse order of Up, going
// on past failures so that one stuck step leaves as little as possible;
// the error joins every step's.
func teardown(ctx context.Context, s *state, progress io.Writer) (DownResult, error) {
	if progress == nil {
		progress = io.Discard
	}
	l := layout{s.StateDir}
	var errs []error
	do := func(what string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			fmt.Fprintf(progress, "%-44s %s (failed)\n", what, time.Since(start).Round(10*time.Millisecond))
			return
		}
		fmt.Fprintf(progress, "%-44s %s\n", what, time.Since(start).Round(10*time.Millisecond))
	}
	// Controllers first, so that nothing recreates the pods deleted next.
	do("stop kube-controller-manager, kube-scheduler", func() error {
		return stopRecorded(s, "kube-controller-manager", "kube-scheduler")
	})
	do("delete pods (the kubelet runs CNI DEL)", func() error { return deletePods(ctx, s) })
	do("stop CoreDNS, kube-proxy, kubelet", func() error { return stopRecorded(s, "coredns", "kube-proxy", "kubelet") })
	// --cleanup removes every chain of kube-proxy's names: on a host that
	// had some before up (a kube-proxy of its own; up refuses such a host
	// now, but not a state file's older up), they are that one's, and only
	// the new ones go (removeNewChains).
	if !hadKubeChains(s.Host.Iptables) {
		do("kube-proxy --cleanup", func() error { return kubeProxyCleanup(ctx) })
	}
	do("stop containers and containerd", func() error {
		killCgroupProcs(s.Cgroups)
		err := stopRecorded(s, "containerd")
		killShims(l.containerdSocket())
		return err
	})
	do("stop kube-apiserver, etcd", func() error { return stopRecorded(s, "kube-apiserver", "etcd") })
	do("stop what else is recorded", func() error { return stopRecorded(s) })
	do("unmount", func() error { return unmountNew(s) })
	do("network", func() error { return undoNetwork(s.Network) })
	do("sysctls", func() error { return restoreSysctls(s.Host.Sysctls) })
	do("iptables chains", func() error { return removeNewChains(s.Host.Iptables) })
	do("cgroups", func() error { return removeCgroups(s.Cgroups) })
	do("directories", func() error { return removeNewDirs(s, len(errs) == 0) })
	if len(errs) > 0 {
		return DownResult{}, errors.Join(errs...)
	}
	after, err := Snapshot()
	if err != nil {
		return DownResult{}, err
	}
	return DownResult{Differences: Diff(s.Host, after)}, nil
}

// stopRecorded stops the named recorded processes (every one if none is
// named), last started first.
func stopRecorded(s *state, names ...string) error {
	var errs []error
	for i := len(s.Processes) - 1; i >= 0; i-- {
		r := s.Processes[i]
		if len(names) > 0 && !slices.Contains(names, r.Name) {
			continue
		}
		if err := r.Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func alive(s *state, name string) bool {
	for _, r := range s.Processes {
		if r.Name == name {
			return r.Alive()
		}
	}
	return false
}

// deletePods deletes every pod through the API and waits for the kubelet
// to have stopped them: that is what runs CNI DEL for each, releasing its
// address and veth. Without an API server or kubelet there is nobody to
// ask; the later steps remove what the pods left.
func deletePods(ctx context.Context, s *state) error {
	if !alive(s, "kube-apiserver") || !alive(s, "kubelet") {
		return nil
	}
	c, err := adminClient(s.StateDir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, podDeleteWait)
	defer cancel()
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	grace := int64(1)
	for _, p := range pods.Items {
		err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && ctx.Err() != nil {
			return err
		}
	}
	left := pods // what the last list that answered had
	for {
		l, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil {
			if left = l; len(l.Items) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods still there after %s: %s", podDeleteWait, podNames(left))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podNames(l *corev1.PodList) string {
	var n []string
	for _, p := range l.Items {
		n = append(n, p.Namespace+"/"+p.Name)
	}
	return strings.Join(n, ", ")
}

// kubeProxyCleanup removes kube-proxy's rules and chains. Its exit status
// is not the verdict: it also tears down IPVS state, and fails without
// ipset, which an iptables-mode cluster never needs; removeNewChains and
// the comparison after teardown say whether the host is clean.
func kubeProxyCleanup(ctx context.Context) error {
	b, err := dist.Find()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, b.Path(dist.KubeProxy), "--cleanup").Run()
	return ctx.Err()
}

// hadKubeChains says whether a host had chains of kube-proxy's names
// before up.
func hadKubeChains(before map[string]IptablesTable) bool {
	for _, t := range before {
		for c := range t.Chains {
			if strings.HasPrefix(c, "KUBE-") {
				return true
			}
		}
	}
	return false
}

// killShims kills the runc shims of this cluster's containerd, and only
// those: a shim is told its containerd's socket on its command line. A
// killed shim leaves its socket, which containerd 1.6 keeps outside the
// state directory whatever it is told (shimSocket); it goes too.
func killShims(socket string) {
	pids, _ := procstat.PIDs()
	for _, pid := range pids {
		args, err := procstat.Cmdline(pid)
		if err != nil || len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		if flagValue(args, "-address") != socket {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if ns, id := flagValue(args, "-namespace"), flagValue(args, "-id"); ns != "" && id != "" {
			_ = os.Remove(shimSocket(socket, ns, id))
		}
	}
}

// shimSocketDir is where containerd 1.6's shims listen: its default state
// directory, fixed in the shim whatever containerd's config says.
const shimSocketDir = "/run/containerd/s"

// shimSocket is the socket of the shim for task id in namespace ns of
// the containerd at address: named by the hash of the three, as the shim
// names it (runtime/v2/shim.SocketAddress), so that each containerd's
// shims have their own.
func shimSocket(address, ns, id string) string {
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sha256.Sum256([]byte(filepath.Join(address, ns, id)))))
}

// flagValue is the argument after flag in args, "" if none.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// unmountNew detaches every mount the cluster made, deepest first: they
// are all in its state directory (container root filesystems and shm,
// the kubelet's volumes, and the pods' network namespaces, which
// containerd is told to keep under its state). A new mount anywhere else
// is another party's.
func unmountNew(s *state) error {
	now, err := mountPoints()
	if err != nil {
		return err
	}
	added, _ := multisetDiff(s.Host.Mounts, now)
	slices.SortFunc(added, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, m := range added {
		if !underAny(m, []string{s.StateDir}) {
			continue
		}
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// underAny says whether path is one of roots or under one.
func underAny(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// restoreSysctls writes back every saved value that changed;
// net.ipv4.ip_forward first, as writing it resets every interface's
// forwarding.
func restoreSysctls(saved map[string]string) error {
	keys := sortedKeys(saved)
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolInt(b == "net.ipv4.ip_forward") - boolInt(a == "net.ipv4.ip_forward")
	})
	var errs []error
	for _, k := range keys {
		if cur, err := readSysctl(k); err == nil && cur == saved[k] {
			continue
		}
		if err := writeSysctl(k, saved[k]); err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", k, saved[k], err))
		}
	}
	return errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isClusterChain is a chain the kubelet, kube-proxy or CNI create.
func isClusterChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-")
}

// removeNewChains removes the chains the cluster created (KUBE-*, CNI-*)
// that were not there before, and the rules in the host's own chains that
// jump to them; nothing else of the host's rules is touched.
func removeNewChains(before map[string]IptablesTable) error {
	var errs []error
	for _, fam := range []string{"ipv4", "ipv6"} {
		now, err := iptablesSave(fam)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		script := chainRemovalScript(fam, before, now)
		if script == "" {
			continue
		}
		cmd := "iptables-restore"
		if fam == "ipv6" {
			cmd = "ip6tables-restore"
		}
		c := exec.Command(cmd, "--noflush")
		c.Stdin = strings.NewReader(script)
		if out, err := c.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v: %s", cmd, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// chainRemovalScript is the iptables-restore input removing a family's
// new cluster chains and the jumps to them, "" if there are none.
func chainRemovalScript(fam string, before map[string]IptablesTable, now map[string]IptablesTable) string {
	var b strings.Builder
	for _, table := range sortedKeys(now) {
		old := before[fam+"/"+table]
		var chains []string
		for _, c := range sortedKeys(now[table].Chains) {
			if _, was := old.Chains[c]; !was && isClusterChain(c) {
				chains = append(chains, c)
			}
		}
		if len(chains) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", table)
		added, _ := multisetDiff(old.Rules, now[table].Rules)
		for _, r := range added {
			f := strings.Fields(r)
			if len(f) < 2 || slices.Contains(chains, f[1]) {
				continue // flushed with its chain
			}
			if jumpsTo(f, chains) {
				fmt.Fprintf(&b, "-D%s\n", strings.TrimPrefix(r, "-A"))
			}
		}
		for _, c := range chains {
			fmt.Fprintf(&b, "-F %s\n", c)
		}
		for _, c := range chains {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// jumpsTo says whether a rule's fields jump (-j) or go (-g) to one of
// chains.
func jumpsTo(fields, chains []string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && slices.Contains(chains, fields[i+1]) {
			return true
		}
	}
	return false
}

// removeNewDirs removes the cluster's files outside the state directory
// (removeRuntimeFiles), then the runtime directories that did not exist
// before while they are empty (what is left in one is another party's),
// and, if withState, what Up put in the state directory, then the
// directories Up created for it while they are empty (a parent such as
// /var/lib/meshperf may hold other things by then). After a failed step
// the state file stays, so that a second down can finish. A directory of
// the state with a mount still under it is left, as removing it would
// reach into the mounted filesystem.
func removeNewDirs(s *state, withState bool) error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	errs := []error{removeRuntimeFiles(s.StateDir, s.Host)}
	for _, d := range runtimeDirs {
		if !s.Host.Dirs[d] {
			removeEmptyTree(d)
		}
	}
	if withState {
		for _, e := range stateEntries {
			d := filepath.Join(s.StateDir, e)
			if busy := slices.ContainsFunc(mounts, func(m string) bool { return underAny(m, []string{d}) }); busy {
				errs = append(errs, fmt.Errorf("%s still has a mount under it", d))
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	err = errors.Join(errs...)
	if withState && err == nil {
		// One not empty is someone else's now.
		removeCreated(s.Created)
	}
	return err
}

// The files the kubelet and CNI keep outside the state directory whatever
// they are told.
const (
	// kubeletDevicePlugins holds the kubelet's device-plugin socket and
	// checkpoint: one per machine, so up refuses a host that has the
	// socket (kubeletInUse).
	kubeletDevicePlugins = "/var/lib/kubelet/device-plugins"
	// containerLogLinks holds the kubelet's links to its containers' logs.
	containerLogLinks = "/var/log/containers"
	// cniResultCache holds libcni's results, one file per pod named
	// NETWORK-CONTAINER-IFNAME.
	cniResultCache = "/var/lib/cni/results"
)

// removeRuntimeFiles removes the files of this cluster's kubelet and CNI
// outside the state directory, known as theirs by name or by where they
// point: the device-plugin socket and checkpoint, the log links into the
// state directory, the results cached for the cluster's pod sandboxes
// (which a pod's CNI DEL removes, unless a crash prevented it).
func removeRuntimeFiles(stateDir string, host HostState) error {
	errs := []error{removeKubeletFiles(kubeletDevicePlugins, host.KubeletFiles)}
	var files []string
	links, _ := os.ReadDir(containerLogLinks)
	for _, e := range links {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && underAny(target, []string{stateDir}) {
			files = append(files, p)
		}
	}
	for _, id := range sandboxIDs(stateDir) {
		// containerd's own loopback network, then the cluster's.
		for _, network := range []string{"cni-loopback", cniNetwork} {
			results, _ := filepath.Glob(filepath.Join(cniResultCache, network+"-"+id+"-*"))
			files = append(files, results...)
		}
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kubeletFiles are the device-plugin directory dir, where the kubelet
// makes its socket and checkpoint whatever it is told, and those two files.
func kubeletFiles(dir string) []string {
	return []string{dir, filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "kubelet_internal_checkpoint")}
}

// existing says which of paths exist.
func existing(paths []string) map[string]bool {
	m := make(map[string]bool, len(paths))
	for _, p := range paths {
		_, err := os.Lstat(p)
		m[p] = err == nil
	}
	return m
}

// removeKubeletFiles removes what of kubeletFiles(dir) did not exist at Up
// (had): the files, then the directory if empty. A checkpoint an earlier
// kubelet on the host left stays, as does the directory holding it.
func removeKubeletFiles(dir string, had map[string]bool) error {
	paths := kubeletFiles(dir)
	var errs []error
	for _, f := range paths[1:] {
		if had[f] {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if !had[dir] {
		_ = os.Remove(dir) // only if empty: what is left is another party's
	}
	return errors.Join(errs...)
}

// sandboxIDs are the ids of the pod sandboxes the cluster's containerd
// has, from its root and state directories' CRI records.
func sandboxIDs(stateDir string) []string {
	l := layout{stateDir}
	var ids []string
	for _, d := range []string{"root", "state"} {
		entries, _ := os.ReadDir(filepath.Join(l.containerdDir(), d, "io.containerd.grpc.v1.cri", "sandboxes"))
		for _, e := range entries {
			if !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	return ids
}

// removeEmptyTree removes dir and the directories under it, deepest
// first, as far as they are empty.
func removeEmptyTree(dir string) {
	dirs := treeDirs(dir)
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// treeDirs lists root and the directories under it, parents before their
// children; none if root is missing.
func treeDirs(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}
