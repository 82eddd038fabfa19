package pod

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	return &Pod{name: name, ip: ip, kind: KindNetns, ns: ns, adopted: true}, nil
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

// ErrAmbiguousNetns is FindNetns finding the address in more than one
// network namespace: one of them is not the pod's, and handing it the
// pod's identity would let whoever made it speak as the pod.
var ErrAmbiguousNetns = errors.New("more than one network namespace has the address")

// FindNetns looks through procRoot (the host's /proc: a node agent runs
// with the host's PID namespace) for the network namespace that has ip on
// one of its interfaces, and returns a process's PROCROOT/PID/ns/net in it
// and the namespace's identity. It needs nothing of the container runtime.
// Every namespace is looked at: if two have the address (a process that
// made a namespace of its own and gave it the pod's address), none is
// chosen (ErrAmbiguousNetns). The caller's own namespace is skipped, so an
// address it holds itself is never taken for a pod's.
func FindNetns(procRoot string, ip netip.Addr) (string, NetnsID, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return "", NetnsID{}, fmt.Errorf("find network namespace of %s: %w", ip, err)
	}
	self, _ := statNS("/proc/self/ns/net")
	seen := map[nsID]bool{self: true}
	var found []string
	var foundID nsID
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
			found, foundID = append(found, path), id
		}
	}
	switch len(found) {
	case 0:
		return "", NetnsID{}, fmt.Errorf("find network namespace of %s in %s: %w", ip, procRoot, ErrNoNetns)
	case 1:
		return found[0], NetnsID{foundID.dev, foundID.ino}, nil
	}
	return "", NetnsID{}, fmt.Errorf("find network namespace of %s: %w (%s): refusing to choose", ip, ErrAmbiguousNetns, strings.Join(found, ", "))
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
