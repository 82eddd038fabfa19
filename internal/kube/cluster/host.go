package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// HostState is what the cluster may change on the host, as it was: Up
// records it before changing anything, Down restores it and compares.
type HostState struct {
	// Sysctls are the values of the settings the kubelet, kube-proxy and
	// the bridge plugin write; a setting the kernel lacks is absent.
	Sysctls map[string]string `json:"sysctls"`
	// Iptables are the chains and rules per family and table, e.g.
	// "ipv4/filter".
	Iptables map[string]IptablesTable `json:"iptables"`
	Routes   []string                 `json:"routes"`    // IPv4, every table
	Addrs    []string                 `json:"addresses"` // IPv4: "dev prefix"
	Links    []string                 `json:"links"`
	Mounts   []string                 `json:"mounts"` // mount points, in mount order
	// Dirs says which of the directories the runtime and the kubelet create
	// outside the state directory existed.
	Dirs map[string]bool `json:"dirs"`
	// KubeletFiles says which of the files the kubelet keeps outside the
	// state directory (kubeletFiles) existed, so that Down removes only
	// those its kubelet made; absent in the state of an older Up, which
	// Down then takes as none.
	KubeletFiles map[string]bool `json:"kubelet_files,omitempty"`
	Cgroups      []string        `json:"cgroups"` // the cgroup hierarchies' top-level directories
	Netns        []string        `json:"netns"`   // named network namespaces
}

// IptablesTable is one table of iptables-save's output.
type IptablesTable struct {
	Chains map[string]string `json:"chains"` // name -> policy ("-" for a user chain)
	Rules  []string          `json:"rules"`  // "-A CHAIN ..." lines, in order
}

// hostSysctls are the settings something in the cluster writes: the kubelet
// (overcommit, panics, key quotas), the bridge plugin (forwarding),
// kube-proxy (conntrack, route_localnet, bridge netfilter).
var hostSysctls = []string{
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.forwarding",
	"net.ipv4.conf.default.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.ipv6.conf.all.forwarding",
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"net.netfilter.nf_conntrack_max",
	"net.netfilter.nf_conntrack_tcp_timeout_established",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
}

// runtimeDirs are directories outside the state directory that containerd,
// CNI and the kubelet create whatever they are told: the shims' sockets
// (containerd 1.6 keeps them in /run/containerd/s), CNI's result cache,
// device-plugin sockets, the container log links. runc's root and the
// pods' network namespaces are in the state directory (render.go). Down
// removes the cluster's files in them (removeRuntimeFiles, killShims) and
// then those that were new, while empty.
var runtimeDirs = []string{
	"/var/lib/cni", "/run/containerd", "/var/lib/kubelet",
	"/var/log/pods", "/var/log/containers", "/etc/cni", "/opt/cni", "/var/lib/containerd", "/etc/kubernetes",
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Snapshot reads the host's state.
func Snapshot() (HostState, error) {
	s := HostState{Sysctls: map[string]string{}, Iptables: map[string]IptablesTable{}, Dirs: map[string]bool{}}
	for _, k := range hostSysctls {
		if v, err := readSysctl(k); err == nil {
			s.Sysctls[k] = v
		}
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		tables, err := iptablesSave(fam)
		if err != nil {
			return s, err
		}
		for name, t := range tables {
			s.Iptables[fam+"/"+name] = t
		}
	}
	var err error
	if s.Links, s.Addrs, s.Routes, err = netState(); err != nil {
		return s, err
	}
	if s.Mounts, err = mountPoints(); err != nil {
		return s, err
	}
	for _, d := range runtimeDirs {
		_, err := os.Lstat(d)
		s.Dirs[d] = err == nil
	}
	s.KubeletFiles = existing(kubeletFiles(kubeletDevicePlugins))
	s.Cgroups = cgroupTops()
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			s.Netns = append(s.Netns, e.Name())
		}
	}
	return s, nil
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(key, value string) error {
	return os.WriteFile(sysctlPath(key), []byte(value+"\n"), 0o644)
}

// iptablesSave reads a family's tables; IPv6 without ip6tables-save or
// kernel support has none.
func iptablesSave(family string) (map[string]IptablesTable, error) {
	cmd := "iptables-save"
	if family == "ipv6" {
		cmd = "ip6tables-save"
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		if family == "ipv6" {
			return nil, nil
		}
		return nil, fmt.Errorf("%s not found; install iptables (apt-get install iptables)", cmd)
	}
	out, err := exec.Command(path).Output()
	if err != nil {
		if family == "ipv6" {
			// A kernel without IPv6 netfilter: nothing there to change.
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return parseIptablesSave(out), nil
}

// parseIptablesSave reads iptables-save's output (without counters on the
// rules; the chains' counters are dropped).
func parseIptablesSave(out []byte) map[string]IptablesTable {
	tables := map[string]IptablesTable{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || line == "COMMIT":
		case strings.HasPrefix(line, "*"):
			cur = line[1:]
			if _, ok := tables[cur]; !ok {
				tables[cur] = IptablesTable{Chains: map[string]string{}}
			}
		case strings.HasPrefix(line, ":") && cur != "":
			f := strings.Fields(line[1:])
			if len(f) >= 2 {
				tables[cur].Chains[f[0]] = f[1]
			}
		case strings.HasPrefix(line, "-A ") && cur != "":
			t := tables[cur]
			t.Rules = append(t.Rules, line)
			tables[cur] = t
		}
	}
	return tables
}

// netState lists the IPv4 links, addresses and routes as comparable lines.
func netState() (links, addrs, routes []string, err error) {
	ll, err := netlink.LinkList()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range ll {
		names[l.Attrs().Index] = l.Attrs().Name
		links = append(links, l.Attrs().Name)
	}
	al, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range al {
		addrs = append(addrs, names[a.LinkIndex]+" "+a.IPNet.String())
	}
	rl, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range rl {
		routes = append(routes, routeLine(r, names))
	}
	slices.Sort(links)
	slices.Sort(addrs)
	slices.Sort(routes)
	return links, addrs, routes, nil
}

func routeLine(r netlink.Route, names map[int]string) string {
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s table %d type %d", dst, r.Table, r.Type)
	if r.Gw != nil {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	if r.LinkIndex != 0 {
		fmt.Fprintf(&b, " dev %s", names[r.LinkIndex])
	}
	if r.Src != nil {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	return b.String()
}

// mountPoints lists the mount points of this mount namespace.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(b), nil
}

func parseMountinfo(b []byte) []string {
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 {
			points = append(points, unescapeMount(f[4]))
		}
	}
	return points
}

// unescapeMount undoes mountinfo's octal escapes (a space is \040).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupHierarchies are the directories holding a cgroup hierarchy: each
// controller's under cgroup v1, the root itself under v2.
func cgroupHierarchies() []string {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return []string{cgroupRoot}
	}
	var dirs []string
	entries, _ := os.ReadDir(cgroupRoot)
	for _, e := range entries {
		p := filepath.Join(cgroupRoot, e.Name())
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

func cgroupTops() []string {
	var tops []string
	for _, h := range cgroupHierarchies() {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() {
				tops = append(tops, filepath.Join(h, e.Name()))
			}
		}
	}
	slices.Sort(tops)
	return tops
}

// Diff lists, one line each, how after differs from before.
func Diff(before, after HostState) []string {
	var d []string
	for _, k := range sortedKeys(before.Sysctls, after.Sysctls) {
		if b, a := before.Sysctls[k], after.Sysctls[k]; b != a {
			d = append(d, fmt.Sprintf("sysctl %s is %q, was %q", k, a, b))
		}
	}
	for _, k := range sortedKeys(before.Iptables, after.Iptables) {
		b, a := before.Iptables[k], after.Iptables[k]
		for _, c := range sortedKeys(b.Chains, a.Chains) {
			bp, bok := b.Chains[c]
			ap, aok := a.Chains[c]
			switch {
			case !bok && aok && ap != "-":
				// A built-in chain of a table that appeared empty (nft
				// creates a table's base chains on first use): no rule
				// and the default policy change nothing.
				if ap != "ACCEPT" {
					d = append(d, fmt.Sprintf("iptables %s: chain %s policy %s is new", k, c, ap))
				}
			case !bok:
				d = append(d, fmt.Sprintf("iptables %s: chain %s is new", k, c))
			case !aok:
				d = append(d, fmt.Sprintf("iptables %s: chain %s is gone", k, c))
			case bp != ap:
				d = append(d, fmt.Sprintf("iptables %s: chain %s policy is %s, was %s", k, c, ap, bp))
			}
		}
		added, removed := multisetDiff(b.Rules, a.Rules)
		for _, r := range added {
			d = append(d, fmt.Sprintf("iptables %s: rule is new: %s", k, r))
		}
		for _, r := range removed {
			d = append(d, fmt.Sprintf("iptables %s: rule is gone: %s", k, r))
		}
	}
	for _, l := range []struct {
		what          string
		before, after []string
	}{
		{"route", before.Routes, after.Routes},
		{"address", before.Addrs, after.Addrs},
		{"link", before.Links, after.Links},
		{"mount", before.Mounts, after.Mounts},
		{"cgroup", before.Cgroups, after.Cgroups},
		{"network namespace", before.Netns, after.Netns},
	} {
		added, removed := multisetDiff(l.before, l.after)
		for _, x := range added {
			d = append(d, fmt.Sprintf("%s is new: %s", l.what, x))
		}
		for _, x := range removed {
			d = append(d, fmt.Sprintf("%s is gone: %s", l.what, x))
		}
	}
	for _, k := range sortedKeys(before.Dirs, after.Dirs) {
		if b, a := before.Dirs[k], after.Dirs[k]; b != a {
			if a {
				d = append(d, fmt.Sprintf("directory is new: %s", k))
			} else {
				d = append(d, fmt.Sprintf("directory is gone: %s", k))
			}
		}
	}
	return d
}

// multisetDiff is what after has more of than before, and what less.
func multisetDiff(before, after []string) (added, removed []string) {
	count := map[string]int{}
	for _, x := range before {
		count[x]++
	}
	for _, x := range after {
		if count[x] > 0 {
			count[x]--
			continue
		}
		added = append(added, x)
	}
	for _, x := range before {
		if count[x] > 0 {
			count[x]--
			removed = append(removed, x)
		}
	}
	return added, removed
}

func sortedKeys[V any](maps ...map[string]V) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// kubeletInUse says whether a kubelet's device-plugin socket is there: the
// cluster's kubelet would replace it, and Down remove it.
func kubeletInUse() []string {
	sock := filepath.Join(kubeletDevicePlugins, "kubelet.sock")
	if _, err := os.Lstat(sock); err == nil {
		return []string{"a kubelet's socket " + sock}
	}
	return nil
}

// inUse says what the host has already of what the cluster needs to
// itself: addresses or routes in its range, its bridge, a kube-proxy's
// chains (the cluster's kube-proxy would delete another's, as its own
// stale ones). Up refuses such a host, as the cluster would change or
// Down remove them.
func inUse(s HostState) []string {
	r := netip.MustParsePrefix(Range)
	var used []string
	if slices.Contains(s.Links, Bridge) {
		used = append(used, "link "+Bridge)
	}
	if hadKubeChains(s.Iptables) {
		used = append(used, "iptables chains KUBE-* (a kube-proxy's)")
	}
	for _, a := range s.Addrs {
		f := strings.Fields(a)
		if p, err := netip.ParsePrefix(f[len(f)-1]); err == nil && r.Overlaps(p) {
			used = append(used, "address "+a)
		}
	}
	for _, line := range s.Routes {
		f := strings.Fields(line)
		// A default route covers every range; only a more specific one
		// competes with the cluster's.
		if p, err := netip.ParsePrefix(f[0]); err == nil && p.Bits() > 0 && r.Overlaps(p) {
			used = append(used, "route "+line)
		}
	}
	return used
}
