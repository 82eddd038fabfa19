package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// network gives the host the cluster's addresses, recording each change
// in the state file once made, and only then, so that Down never removes
// what another party had (Up refused a host that had any of them, but one
// may appear in between): the node IP on lo (the kernel here has no dummy
// driver), a blackhole for the whole range so that nothing in it is routed
// off the machine, and the pods' bridge with its gateway address and the
// route that lets the host reach Service IPs (kube-proxy's DNAT happens
// after routing, which must not hit the blackhole). A crash between a
// change and its record leaves that change behind, and the next up says
// so.
func (u *upper) network() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(lo, nodeAddr()); err != nil {
		return fmt.Errorf("add %s to lo: %w", NodeIP, err)
	}
	u.s.Network.NodeAddress = true
	if err := u.s.save(); err != nil {
		return err
	}
	if err := netlink.RouteAdd(blackholeRoute()); err != nil {
		return fmt.Errorf("blackhole route %s: %w", Range, err)
	}
	u.s.Network.Blackhole = true
	if err := u.s.save(); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: Bridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s: %w", Bridge, err)
	}
	// Its address and the Service route go with it.
	u.s.Network.Bridge = true
	if err := u.s.save(); err != nil {
		return err
	}
	gw := mustIPNet(PodGateway, PodCIDR)
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil {
		return fmt.Errorf("address %s on %s: %w", gw, Bridge, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return err
	}
	_, svc, _ := net.ParseCIDR(ServiceCIDR)
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: br.Attrs().Index, Dst: svc, Src: gw.IP}); err != nil {
		return fmt.Errorf("route %s via %s: %w", ServiceCIDR, Bridge, err)
	}
	return nil
}

func nodeAddr() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(NodeIP).To4(), Mask: net.CIDRMask(32, 32)}}
}

func blackholeRoute() *netlink.Route {
	_, dst, _ := net.ParseCIDR(Range)
	return &netlink.Route{Dst: dst, Type: unix.RTN_BLACKHOLE}
}

// mustIPNet is ip with prefix's mask; both are the package's constants.
func mustIPNet(ip, prefix string) *net.IPNet {
	_, n, err := net.ParseCIDR(prefix)
	if err != nil {
		panic(err)
	}
	return &net.IPNet{IP: net.ParseIP(ip).To4(), Mask: n.Mask}
}

// undoNetwork removes what network added, as far as the state says it
// got; what is already gone is no error.
func undoNetwork(n networkChanges) error {
	var errs []error
	if n.Bridge {
		// Its address and the Service route go with it.
		if l, err := netlink.LinkByName(Bridge); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete bridge %s: %w", Bridge, err))
			}
		}
	}
	if n.Blackhole {
		if err := netlink.RouteDel(blackholeRoute()); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete blackhole route %s: %w", Range, err))
		}
	}
	if n.NodeAddress {
		if lo, err := netlink.LinkByName("lo"); err == nil {
			if err := netlink.AddrDel(lo, nodeAddr()); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				errs = append(errs, fmt.Errorf("delete %s from lo: %w", NodeIP, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ResolveAPIService asks the cluster's DNS, at its Service IP (so through
// kube-proxy's rules), for the kubernetes Service.
func ResolveAPIService(ctx context.Context) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(DNSServiceIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	name := "kubernetes.default.svc." + ClusterDomain
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a == APIServiceIP {
			return nil
		}
	}
	return fmt.Errorf("%s resolves to %v, not %s", name, addrs, APIServiceIP)
}
