package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// MissingError is what the machine lacks to run the cluster, one line
// each, with how to get it.
type MissingError struct{ Lines []string }

func (e *MissingError) Error() string {
	return "this machine cannot run the cluster: " + strings.Join(e.Lines, "; ")
}

// tools are the commands up drives or starts, with their Debian packages.
type tools struct {
	etcd, containerd, ctr, runc string
	bins                        dist.Bins
}

// requiredCommands are the system commands, by Debian package.
var requiredCommands = []struct{ command, pkg string }{
	{"etcd", "etcd-server"},
	{"containerd", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"iptables-save", "iptables"},
	{"iptables-restore", "iptables"},
	{"conntrack", "conntrack"},
}

// cniDir is where Debian's containernetworking-plugins puts the plugins.
const cniDir = "/usr/lib/cni"

// checkMachine finds everything up needs, or says in one line each what is
// missing and how to get it.
func checkMachine(stateDir string) (tools, error) {
	var t tools
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root: the cluster creates addresses, routes, a bridge, iptables chains, cgroups and mounts (run as root)")
	}
	found := map[string]string{}
	for _, c := range requiredCommands {
		p, err := syscmd.Find(c.command, c.pkg)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		found[c.command] = p
	}
	t.etcd, t.containerd, t.ctr, t.runc = found["etcd"], found["containerd"], found["ctr"], found["runc"]
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniDir, plugin)); err != nil {
			missing = append(missing, fmt.Sprintf("CNI plugin %s not found in %s; install containernetworking-plugins (apt-get install containernetworking-plugins)", plugin, cniDir))
		}
	}
	bins, err := dist.Find()
	if err != nil {
		missing = append(missing, err.Error())
	}
	t.bins = bins
	if line := checkCgroups(); line != "" {
		missing = append(missing, line)
	}
	if line := checkDisk(stateDir, minFreeDisk); line != "" {
		missing = append(missing, line)
	}
	if len(missing) > 0 {
		return t, &MissingError{Lines: missing}
	}
	return t, nil
}

// checkCgroups says what is missing of the cgroup controllers the kubelet
// needs, under cgroup v1 or v2 as found ("" if nothing).
func checkCgroups() string {
	need := []string{"cpu", "cpuset", "memory", "pids"}
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		have := strings.Fields(string(b))
		var lack []string
		for _, c := range need {
			if !slices.Contains(have, c) {
				lack = append(lack, c)
			}
		}
		if len(lack) > 0 {
			return fmt.Sprintf("cgroup v2 without the %s controller(s) at %s: the kubelet needs them", strings.Join(lack, ", "), cgroupRoot)
		}
		return ""
	}
	var lack []string
	for _, c := range need {
		if _, err := os.Stat(filepath.Join(cgroupRoot, c, "cgroup.procs")); err != nil {
			lack = append(lack, c)
		}
	}
	if len(lack) > 0 {
		return fmt.Sprintf("cgroup v1 without the %s hierarchy(ies) mounted under %s: the kubelet needs them", strings.Join(lack, ", "), cgroupRoot)
	}
	return ""
}

// minFreeDisk is the free space up wants where the cluster keeps its
// files: the images, etcd's data and the pods' logs take a few hundred MB;
// the kubelet evicts pods below 100 MiB (render.go's kubelet.yaml).
const minFreeDisk = 1 << 30

// checkDisk says if the filesystem that will hold dir (its nearest
// existing ancestor) has less than need bytes free ("" if it has enough).
func checkDisk(dir string, need uint64) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil {
			free := st.Bavail * uint64(st.Bsize)
			if free < need {
				return fmt.Sprintf("%d MiB free on the filesystem of %s, and the cluster needs %d MiB: free some space or give another --state-dir", free>>20, d, need>>20)
			}
			return ""
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// errNoCluster is Down's and Status's error when the state directory holds
// no cluster.
var errNoCluster = errors.New("no cluster")

// IsNoCluster reports whether err says there is no cluster to act on.
func IsNoCluster(err error) bool { return errors.Is(err, errNoCluster) }
