package pod

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Adopt opens the network namespace at path, a pod this lab did not make
// (a Kubernetes pod's /proc/PID/ns/net, as a node agent finds it), as a Pod
// whose capture methods (CaptureInpod, Capture, Uncapture, Do) work on it
// exactly as on the lab's own pods. Release closes the handle; the
// namespace stays its owner's.
func Adopt(name string, ip netip.Addr, path string) (*Pod, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("pod %s: open network namespace %s: %w", name, path, err)
	}
	return &Pod{name: name, ip: ip, kind: KindNetns, ns: ns}, nil
}

// Release closes an adopted pod's namespace handle; the pod accepts no
// command after it. Releasing twice is not an error.
func (p *Pod) Release() error {
	if !p.markClosed() || p.kind != KindNetns {
		return nil
	}
	return p.ns.Close()
}

// ErrNoNetns is FindNetns finding no process in a namespace with the address.
var ErrNoNetns = errors.New("no process's network namespace has the address")

// NetnsID identifies a network namespace across paths (/proc/A/ns/net and
// /proc/B/ns/net of two processes in it are the same namespace).
type NetnsID struct{ Dev, Ino uint64 }

// StatNetns is the identity of the namespace at path.
func StatNetns(path string) (NetnsID, error) {
	id, err := statNS(path)
	return NetnsID{id.dev, id.ino}, err
}

// FindNetns looks through procRoot (the host's /proc: a node agent runs
// with the host's PID namespace) for a process whose network namespace has
// ip on one of its interfaces, and returns that process's
// PROCROOT/PID/ns/net and the namespace's identity. This is how istio-cni
// finds pods that were running before it started, and it needs nothing of
// the container runtime. The host's own namespace (this process's) is
// skipped, so that an address the host also holds is never taken for a pod.
func FindNetns(procRoot string, ip netip.Addr) (string, NetnsID, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return "", NetnsID{}, fmt.Errorf("find network namespace of %s: %w", ip, err)
	}
	self, _ := statNS("/proc/self/ns/net")
	seen := map[nsID]bool{self: true}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		path := filepath.Join(procRoot, e.Name(), "ns", "net")
		id, err := statNS(path)
		if err != nil || seen[id] {
			continue // exited, a zombie, or a namespace already looked at
		}
		seen[id] = true
		if has, err := netnsHasAddr(path, ip); err == nil && has {
			return path, NetnsID{id.dev, id.ino}, nil
		}
	}
	return "", NetnsID{}, fmt.Errorf("find network namespace of %s in %s: %w", ip, procRoot, ErrNoNetns)
}

// netnsHasAddr reports whether the namespace at path has ip on an interface.
func netnsHasAddr(path string, ip netip.Addr) (bool, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return false, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return false, err
	}
	defer h.Close()
	family := netlink.FAMILY_V4
	if ip.Is6() && !ip.Is4In6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := h.AddrList(nil, family)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if got, ok := netip.AddrFromSlice(a.IP); ok && got.Unmap() == ip.Unmap() {
			return true, nil
		}
	}
	return false, nil
}
