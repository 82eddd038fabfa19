package pod

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// subnetLockPath serialises subnet choice between meshperf processes, so
// that two runs starting together do not take the same /24.
const subnetLockPath = "/run/meshperf-lab.lock"

// BridgeNetwork is a Linux bridge with a private /24; its pods are network
// namespaces attached by veth pairs.
type BridgeNetwork struct {
	runID   string
	bridge  string
	gateway netip.Prefix // the bridge's address, e.g. 10.233.7.1/24
	podSet               // next is the last octet of the next pod's address
}

var _ Network = (*BridgeNetwork)(nil)

// NewBridgeNetwork creates the bridge mp-<runID>-br with the first free
// 10.233.N.0/24 (one that no existing address or route overlaps). runID may
// be empty to generate one. Needs root.
func NewBridgeNetwork(runID string) (*BridgeNetwork, error) {
	id, err := checkRunID(runID)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("a bridge network needs root (network namespaces, veths, iptables); run as root or use the loopback network")
	}
	n := &BridgeNetwork{runID: id, bridge: runPrefix(id) + "br", podSet: podSet{next: 2}}
	lock, err := lockFile(subnetLockPath)
	if err != nil {
		return nil, err
	}
	defer lock.Close() // releases the flock
	gw, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n.gateway = gw
	if err := n.createBridge(); err != nil {
		// Remove a half-made bridge; its creation error is the one to report.
		_ = deleteLink(n.bridge)
		return nil, err
	}
	return n, nil
}

func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lab lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lab lock %s: %w", path, err)
	}
	return f, nil
}

// freeSubnet returns the gateway address of the first 10.233.N.0/24 that
// overlaps no address or route on the host.
func freeSubnet() (netip.Prefix, error) {
	var taken []netip.Prefix
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list host addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			taken = append(taken, p)
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: syscall.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list host routes: %w", err)
	}
	for _, r := range routes {
		if p, ok := prefixOf(r.Dst); ok && p.Bits() > 0 { // a default route overlaps everything
			taken = append(taken, p)
		}
	}
	for i := 0; i < 256; i++ {
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 233, byte(i), 0}), 24)
		if !overlapsAny(cand, taken) {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 233, byte(i), 1}), 24), nil
		}
	}
	return netip.Prefix{}, errors.New("no free 10.233.N.0/24 for a lab network: all 256 are in use; run `meshperf lab clean`")
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones).Masked(), true
}

func overlapsAny(p netip.Prefix, taken []netip.Prefix) bool {
	for _, t := range taken {
		if p.Overlaps(t) {
			return true
		}
	}
	return false
}

func (n *BridgeNetwork) createBridge() error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: n.bridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("create bridge %s: %w", n.bridge, err)
	}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: ipNet(n.gateway)}); err != nil {
		return fmt.Errorf("address bridge %s with %s: %w", n.bridge, n.gateway, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring up bridge %s: %w", n.bridge, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Kind implements Network.
func (n *BridgeNetwork) Kind() Kind { return KindNetns }

// RunID implements Network.
func (n *BridgeNetwork) RunID() string { return n.runID }

// NamePrefix implements Network.
func (n *BridgeNetwork) NamePrefix() string { return runPrefix(n.runID) }

// Gateway implements Network: the bridge's address.
func (n *BridgeNetwork) Gateway() netip.Addr { return n.gateway.Addr() }

// Subnet is the network's /24.
func (n *BridgeNetwork) Subnet() netip.Prefix { return n.gateway.Masked() }

// Bridge is the bridge's interface name.
func (n *BridgeNetwork) Bridge() string { return n.bridge }

// Pods implements Network.
func (n *BridgeNetwork) Pods() []*Pod { return n.list() }

// AddPod implements Network: a namespace mp-<run>-<name> whose eth0 is a
// veth on the bridge, with lo up and a default route via the bridge.
func (n *BridgeNetwork) AddPod(name string) (*Pod, error) {
	return n.add(name, n.bridge, func(next int) (*Pod, int, error) {
		if next > 254 {
			return nil, next, fmt.Errorf("add pod %s: network %s is full (253 pods)", name, n.bridge)
		}
		b := n.gateway.Addr().As4()
		b[3] = byte(next)
		p := &Pod{
			name:     name,
			ip:       netip.AddrFrom4(b),
			kind:     KindNetns,
			ns:       netns.None(),
			nsName:   runPrefix(n.runID) + name,
			hostVeth: runPrefix(n.runID) + strconv.Itoa(next),
		}
		if err := n.plumb(p); err != nil {
			return nil, next, errors.Join(fmt.Errorf("add pod %s: %w", name, err), removePod(p))
		}
		return p, next + 1, nil
	})
}

// plumb creates p's namespace and veth and configures both ends.
func (n *BridgeNetwork) plumb(p *Pod) error {
	ns, err := newNamedNetns(p.nsName)
	if err != nil {
		return err
	}
	p.ns = ns
	br, err := netlink.LinkByName(n.bridge)
	if err != nil {
		return fmt.Errorf("find bridge %s: %w", n.bridge, err)
	}
	// The pod end is created directly inside the namespace under a unique
	// temporary name (eth0 would clash in the host namespace), then renamed.
	peer := p.hostVeth + "p"
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.hostVeth, MasterIndex: br.Attrs().Index},
		PeerName:      peer,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", p.hostVeth, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return fmt.Errorf("bring up veth %s: %w", p.hostVeth, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in namespace %s: %w", p.nsName, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("bring up lo in %s: %w", p.nsName, err)
	}
	eth, err := h.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("find veth %s in %s: %w", peer, p.nsName, err)
	}
	if err := h.LinkSetName(eth, "eth0"); err != nil {
		return fmt.Errorf("rename %s to eth0 in %s: %w", peer, p.nsName, err)
	}
	addr := netip.PrefixFrom(p.ip, n.gateway.Bits())
	if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return fmt.Errorf("address eth0 in %s with %s: %w", p.nsName, addr, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bring up eth0 in %s: %w", p.nsName, err)
	}
	route := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: n.gateway.Addr().AsSlice()}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("default route via %s in %s: %w", n.gateway.Addr(), p.nsName, err)
	}
	return nil
}

// Close implements Network.
func (n *BridgeNetwork) Close() error {
	pods, ok := n.close()
	if !ok {
		return nil
	}
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = removePod(p)
		}()
	}
	wg.Wait()
	errs = append(errs, deleteLink(n.bridge))
	return errors.Join(errs...)
}

// removePod stops p's processes, kills anything else still inside its
// namespace, and deletes the namespace and veth. Already-missing pieces are
// not errors, so it also finishes a half-made pod.
func removePod(p *Pod) error {
	if !p.markClosed() {
		return nil
	}
	var errs []error
	if err := p.stopProcesses(); err != nil {
		errs = append(errs, fmt.Errorf("pod %s: %w", p.name, err))
	}
	if p.nsName != "" {
		if id, err := statNS(netnsDir + "/" + p.nsName); err == nil {
			killProcessesIn(map[nsID]bool{id: true})
		}
		if p.ns.IsOpen() {
			p.ns.Close()
		}
		if err := deleteNamedNetns(p.nsName); err != nil {
			errs = append(errs, err)
		}
	}
	if p.hostVeth != "" {
		errs = append(errs, deleteLink(p.hostVeth))
	}
	return errors.Join(errs...)
}

// deleteLink removes a link by name; one that is already gone is not an error.
func deleteLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("find link %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}
