package pod

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestInpodRulesText(t *testing.T) {
	want := `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_PRERT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff
-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_PRERT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_OUTPUT -p tcp -m mark --mark 0x111/0xfff -j ACCEPT
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -j ACCEPT
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001
-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp -m tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006
COMMIT
`
	if got := InpodRules(); got != want {
		t.Errorf("InpodRules():\n%s\nwant:\n%s", got, want)
	}
}

// dialMarked connects to addr from inside p on a socket marked as the node
// proxy marks its own (SO_MARK 0x539), and returns what the server sends.
func dialMarked(p *Pod, addr string) (string, error) {
	return dialReadWith(p, &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var sockErr error
		if err := rc.Control(func(fd uintptr) {
			sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, InpodMark)
		}); err != nil {
			return err
		}
		return sockErr
	}}, addr)
}

// localRouteRules counts, in p's namespace, the rules that send marked
// connections to the in-pod table and that table's routes.
func localRouteRules(t *testing.T, p *Pod) (rules, routes int) {
	t.Helper()
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rs, err := h.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Table == InpodRouteTable && r.Mark == inpodConnMark {
			rules++
		}
	}
	rts, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: InpodRouteTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	return rules, len(rts)
}

// The in-pod rules send the app's outbound connections to a listener on
// 15001 opened inside the pod (the node proxy's), and inbound ones to 15006
// except HBONE's 15008; a socket marked 0x539 (the node proxy's own) and the
// pod's loopback go where they were going. Uncapture undoes all of it.
func TestInpodRedirect(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "client", "server")
	a, b := pods[0], pods[1] // a is enrolled
	for range 2 {            // a second time replaces the first
		if err := a.CaptureInpod(); err != nil {
			t.Fatal(err)
		}
	}
	if rules, routes := localRouteRules(t, a); rules != 1 || routes != 1 {
		t.Errorf("after CaptureInpod: %d fwmark rules and %d routes in table %d, want 1 and 1", rules, routes, InpodRouteTable)
	}
	arrivals := make(chan arrival, 16)
	for _, port := range []int{DefaultOutboundPort, DefaultInboundPort, HBONEPort} {
		watch(t, a, fmt.Sprintf("a:%d", port), fmt.Sprintf(":%d", port), arrivals)
	}
	watch(t, a, "a:lo", "127.0.0.1:9000", arrivals)
	aApp := netip.AddrPortFrom(a.IP(), 8080)
	watch(t, a, "a:8080", aApp.String(), arrivals)
	bApp := netip.AddrPortFrom(b.IP(), 8080)
	watch(t, b, "b:8080", bApp.String(), arrivals)

	dialExpect(t, "app a -> b:8080", a, bApp.String(), arrivals, "a:15001", bApp)

	if got, err := dialMarked(a, bApp.String()); err != nil || got != "ok\n" {
		t.Fatalf("marked dial a -> b:8080: %q, %v", got, err)
	}
	expectArrival(t, "marked 0x539 a -> b:8080", arrivals, "b:8080", netip.AddrPort{})

	dialExpect(t, "b -> a:8080", b, aApp.String(), arrivals, "a:15006", aApp)

	hbone := netip.AddrPortFrom(a.IP(), HBONEPort)
	dialExpect(t, "b -> a:15008", b, hbone.String(), arrivals, "a:15008", netip.AddrPort{})

	dialExpect(t, "a -> own 127.0.0.1:9000", a, "127.0.0.1:9000", arrivals, "a:lo", netip.AddrPort{})

	if err := a.Uncapture(); err != nil {
		t.Fatal(err)
	}
	if rules, routes := localRouteRules(t, a); rules != 0 || routes != 0 {
		t.Errorf("after Uncapture: %d fwmark rules and %d routes in table %d, want none", rules, routes, InpodRouteTable)
	}
	dialExpect(t, "app a -> b:8080 after Uncapture", a, bApp.String(), arrivals, "b:8080", netip.AddrPort{})
}
