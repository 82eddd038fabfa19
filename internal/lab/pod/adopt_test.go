package pod

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
)

// A namespace the lab did not make is found through /proc by the address
// of the process in it, as a node agent finds a Kubernetes pod's, and the
// in-pod capture installs and removes on it through Adopt as on a lab pod.
func TestFindAndAdoptNetns(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "held", "empty")
	held, empty := pods[0], pods[1]
	sleep := testenv.NeedCommand(t, "sleep", "coreutils")
	if _, err := held.Start(proc.Spec{Name: "sleep", Path: sleep, Args: []string{"30"}}); err != nil {
		t.Fatal(err)
	}

	path, id, err := FindNetns("/proc", held.IP())
	if err != nil {
		t.Fatal(err)
	}
	want, err := StatNetns(held.NetnsPath())
	if err != nil {
		t.Fatal(err)
	}
	if id != want {
		t.Fatalf("FindNetns(%s) = %s (%v), want the namespace of %s (%v)", held.IP(), path, id, held.NetnsPath(), want)
	}
	// A namespace no process is in is not found, nor an address nobody has.
	for _, ip := range []netip.Addr{empty.IP(), netip.MustParseAddr("198.19.255.254")} {
		if _, _, err := FindNetns("/proc", ip); !errors.Is(err, ErrNoNetns) {
			t.Errorf("FindNetns(%s): %v, want ErrNoNetns", ip, err)
		}
	}

	// A second namespace with the same address (one made to pass for the
	// pod) makes the answer ambiguous: none is chosen.
	if _, err := empty.Start(proc.Spec{Name: "sleep", Path: sleep, Args: []string{"30"}}); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(empty.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	impostor := &netlink.Addr{IPNet: &net.IPNet{IP: held.IP().AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := h.AddrAdd(lo, impostor); err != nil {
		t.Fatal(err)
	}
	if _, _, err := FindNetns("/proc", held.IP()); !errors.Is(err, ErrAmbiguousNetns) {
		t.Errorf("FindNetns(%s) with two namespaces holding it: %v, want ErrAmbiguousNetns", held.IP(), err)
	}
	if err := h.AddrDel(lo, impostor); err != nil {
		t.Fatal(err)
	}

	adopted, err := Adopt("held", held.IP(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.CaptureInpod(); err != nil {
		t.Fatal(err)
	}
	if rules, routes := localRouteRules(t, held); rules != 1 || routes != 1 {
		t.Errorf("after the adopted pod's CaptureInpod: %d fwmark rules and %d routes in the lab pod's namespace, want 1 and 1", rules, routes)
	}
	if err := adopted.Uncapture(); err != nil {
		t.Fatal(err)
	}
	if rules, routes := localRouteRules(t, held); rules != 0 || routes != 0 {
		t.Errorf("after Uncapture: %d fwmark rules and %d routes, want none", rules, routes)
	}
	// The adopted pod's path is its own handle on the namespace, which
	// names that namespace while the pod is held.
	if got, err := StatNetns(adopted.NetnsPath()); err != nil || got != want {
		t.Errorf("adopted pod's NetnsPath %q: %v %v, want the namespace %v", adopted.NetnsPath(), got, err, want)
	}
	if err := adopted.Release(); err != nil {
		t.Fatal(err)
	}
	if err := adopted.CaptureInpod(); err == nil {
		t.Error("CaptureInpod after Release succeeded")
	}
	if _, err := Adopt("gone", held.IP(), "/proc/0/ns/net"); err == nil {
		t.Error("Adopt of a path that is no namespace succeeded")
	}
}
