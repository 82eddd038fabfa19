package cluster

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func readTables(t *testing.T, path string) map[string]IptablesTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseIptablesSave(b)
}

func prefixed(fam string, tables map[string]IptablesTable) map[string]IptablesTable {
	out := map[string]IptablesTable{}
	for k, v := range tables {
		out[fam+"/"+k] = v
	}
	return out
}

func TestParseIptablesSave(t *testing.T) {
	tables := readTables(t, "testdata/iptables-after.txt")
	f := tables["filter"]
	if f.Chains["INPUT"] != "ACCEPT" || f.Chains["FORWARD"] != "DROP" || f.Chains["KUBE-FIREWALL"] != "-" {
		t.Errorf("chains: %v", f.Chains)
	}
	if len(f.Rules) != 6 || f.Rules[1] != `-A INPUT -m comment --comment "kubernetes firewall for dropping marked packets" -j KUBE-FIREWALL` {
		t.Errorf("rules: %q", f.Rules)
	}
	if len(tables["nat"].Rules) != 1 {
		t.Errorf("nat rules: %q", tables["nat"].Rules)
	}
}

// Teardown removes the new cluster chains and the jumps to them, and
// nothing else: not the host's own rules (even new ones), not a KUBE-
// chain that was there before.
func TestChainRemovalScriptTouchesOnlyWhatTheClusterAdded(t *testing.T) {
	before := prefixed("ipv4", readTables(t, "testdata/iptables-before.txt"))
	after := readTables(t, "testdata/iptables-after.txt")
	got := chainRemovalScript("ipv4", before, after)
	want := strings.Join([]string{
		"*filter",
		`-D INPUT -m comment --comment "kubernetes firewall for dropping marked packets" -j KUBE-FIREWALL`,
		"-D OUTPUT -j KUBE-FIREWALL",
		"-F KUBE-FIREWALL", "-F KUBE-KUBELET-CANARY",
		"-X KUBE-FIREWALL", "-X KUBE-KUBELET-CANARY",
		"COMMIT",
		"*nat",
		`-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		"-F KUBE-SERVICES", "-X KUBE-SERVICES",
		"COMMIT", "",
	}, "\n")
	if got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
	if chainRemovalScript("ipv4", before, readTables(t, "testdata/iptables-before.txt")) != "" {
		t.Error("a script for an unchanged host")
	}
}

func TestDiffSaysEachDifference(t *testing.T) {
	before := HostState{
		Sysctls:  map[string]string{"net.ipv4.ip_forward": "0", "kernel.panic": "1"},
		Iptables: prefixed("ipv4", readTables(t, "testdata/iptables-before.txt")),
		Routes:   []string{"default table 254 type 1 via 192.0.2.1 dev eth0"},
		Addrs:    []string{"lo 127.0.0.1/8"},
		Links:    []string{"eth0", "lo"},
		Mounts:   []string{"/", "/proc"},
		Dirs:     map[string]bool{"/var/lib/kubelet": false, "/run/netns": true},
		Cgroups:  []string{"/sys/fs/cgroup/cpu/user"},
	}
	if d := Diff(before, before); len(d) != 0 {
		t.Fatalf("a state differs from itself: %q", d)
	}
	after := before
	after.Sysctls = map[string]string{"net.ipv4.ip_forward": "1", "kernel.panic": "1"}
	after.Iptables = prefixed("ipv4", readTables(t, "testdata/iptables-after.txt"))
	after.Routes = append(slices.Clone(before.Routes), "198.18.0.0/15 table 254 type 6")
	after.Addrs = []string{}
	after.Mounts = []string{"/", "/proc", "/proc"}
	after.Dirs = map[string]bool{"/var/lib/kubelet": true, "/run/netns": true}
	after.Cgroups = []string{"/sys/fs/cgroup/cpu/kubepods", "/sys/fs/cgroup/cpu/user"}
	got := strings.Join(Diff(before, after), "\n")
	for _, want := range []string{
		`sysctl net.ipv4.ip_forward is "1", was "0"`,
		"iptables ipv4/filter: chain KUBE-FIREWALL is new",
		"iptables ipv4/filter: rule is new: -A INPUT -s 10.0.0.0/8 -j ACCEPT",
		"iptables ipv4/nat: chain KUBE-SERVICES is new",
		"route is new: 198.18.0.0/15 table 254 type 6",
		"address is gone: lo 127.0.0.1/8",
		"mount is new: /proc",
		"cgroup is new: /sys/fs/cgroup/cpu/kubepods",
		"directory is new: /var/lib/kubelet",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"kernel.panic", "chain KUBE-OLD", "chain PREROUTING", "/run/netns"} {
		if strings.Contains(got, not) {
			t.Errorf("diff reports %q, which did not change:\n%s", not, got)
		}
	}
}

func TestMultisetDiffCountsDuplicates(t *testing.T) {
	added, removed := multisetDiff([]string{"a", "a", "b"}, []string{"a", "c", "c"})
	if !slices.Equal(added, []string{"c", "c"}) || !slices.Equal(removed, []string{"a", "b"}) {
		t.Errorf("added %q removed %q", added, removed)
	}
}

func TestParseMountinfoUnescapes(t *testing.T) {
	info := "22 1 0:21 / /proc rw,nosuid - proc proc rw\n" +
		`40 22 0:30 / /run/netns/cni-1\040x rw - nsfs nsfs rw` + "\n"
	got := parseMountinfo([]byte(info))
	if !slices.Equal(got, []string{"/proc", "/run/netns/cni-1 x"}) {
		t.Errorf("%q", got)
	}
}

func TestInUseIgnoresTheDefaultRoute(t *testing.T) {
	s := HostState{
		Routes: []string{"0.0.0.0/0 table 254 type 1 via 192.0.2.1 dev eth0", "10.0.0.0/8 table 254 type 1 dev eth0"},
		Addrs:  []string{"eth0 192.0.2.2/24"},
	}
	if used := inUse(s); len(used) != 0 {
		t.Errorf("in use: %q", used)
	}
	s.Routes = append(s.Routes, "198.19.0.0/16 table 254 type 1 dev eth1")
	s.Addrs = append(s.Addrs, "lo 198.18.0.1/32")
	if used := inUse(s); len(used) != 2 {
		t.Errorf("in use: %q, want the route and the address", used)
	}
	s.Links = []string{"eth0", Bridge}
	s.Iptables = map[string]IptablesTable{"ipv4/nat": {Chains: map[string]string{"KUBE-SERVICES": "-"}}}
	if used := inUse(s); len(used) != 4 {
		t.Errorf("in use: %q, want also the bridge and kube-proxy's chains", used)
	}
}

// Down detaches new mounts in the state directory only: one elsewhere,
// even where a host's runtime keeps its own, is another party's.
func TestUnderAny(t *testing.T) {
	roots := []string{"/var/lib/meshperf/cluster"}
	for path, want := range map[string]bool{
		"/var/lib/meshperf/cluster":                                     true,
		"/var/lib/meshperf/cluster/containerd/x":                        true,
		"/var/lib/meshperf/cluster/containerd/state/netns/cni-1234":     true,
		"/var/lib/meshperf/cluster2":                                    false,
		"/run/netns/cni-1234":                                           false,
		"/run/containerd/io.containerd.runtime.v2.task/k8s.io/x/rootfs": false,
		"/var/lib/kubelet/pods/x/volumes/kube-api-ac":                   false,
	} {
		if got := underAny(path, roots); got != want {
			t.Errorf("underAny(%s) = %v, want %v", path, got, want)
		}
	}
}
