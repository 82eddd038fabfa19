package pod

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/vishvananda/netns"
)

// LoopbackNetwork gives each pod its own address in 127.<n>.0.0/16 of the
// host's namespace. Linux routes all of 127.0.0.0/8 to lo, so any such
// address can be bound without root or configuration. Pods are not isolated
// and cannot be captured: a sidecar must listen on explicit addresses and
// ports, as Istio's captureMode NONE does.
type LoopbackNetwork struct {
	runID  string
	base   [4]byte // 127.n.0.0
	podSet         // next numbers the pods' addresses: 127.n.(next>>8).(next&0xff)
}

var _ Network = (*LoopbackNetwork)(nil)

// NewLoopbackNetwork creates a loopback network; runID may be empty to
// generate one. The second octet is derived from the run id (never 0, so
// never 127.0.0.1's /16), which keeps parallel runs apart with high
// probability; without root there is no way to reserve addresses.
func NewLoopbackNetwork(runID string) (*LoopbackNetwork, error) {
	id, err := checkRunID(runID)
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	n := 1 + h.Sum32()%254
	return &LoopbackNetwork{runID: id, base: [4]byte{127, byte(n), 0, 0}, podSet: podSet{next: 2}}, nil
}

// Kind implements Network.
func (n *LoopbackNetwork) Kind() Kind { return KindLoopback }

// RunID implements Network.
func (n *LoopbackNetwork) RunID() string { return n.runID }

// NamePrefix implements Network. A loopback network creates no named
// objects, so Clean finds nothing of it.
func (n *LoopbackNetwork) NamePrefix() string { return runPrefix(n.runID) }

// Gateway implements Network: host services are on 127.0.0.1.
func (n *LoopbackNetwork) Gateway() netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, 1}) }

// Pods implements Network.
func (n *LoopbackNetwork) Pods() []*Pod { return n.list() }

// AddPod implements Network: the pod's address is 127.n.x.y, counting up.
func (n *LoopbackNetwork) AddPod(name string) (*Pod, error) {
	return n.add(name, "loopback "+n.runID, func(next int) (*Pod, int, error) {
		for next&0xff == 0 || next&0xff == 255 { // skip .0 and .255
			next++
		}
		if next > 0xfffe {
			return nil, next, fmt.Errorf("add pod %s: loopback network %s is full", name, n.runID)
		}
		b := n.base
		b[2], b[3] = byte(next>>8), byte(next)
		return &Pod{name: name, ip: netip.AddrFrom4(b), kind: KindLoopback, ns: netns.None()}, next + 1, nil
	})
}

// Close implements Network: stops every pod's processes.
func (n *LoopbackNetwork) Close() error {
	pods, ok := n.close()
	if !ok {
		return nil
	}
	var errs []error
	for _, p := range pods {
		if p.markClosed() {
			errs = append(errs, p.stopProcesses())
		}
	}
	return errors.Join(errs...)
}
