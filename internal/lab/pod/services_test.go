package pod

import (
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestServiceRulesSpreadOverEndpoints(t *testing.T) {
	vip := netip.MustParseAddr("10.96.1.1")
	got := ServiceRules([]ServiceRoute{
		{VIP: vip, Port: 8080, Endpoints: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4")}},
		{VIP: netip.MustParseAddr("10.96.1.2"), Port: 8080, Endpoints: []netip.Addr{netip.MustParseAddr("10.0.0.5")}},
	})
	for _, want := range []string{
		"-A OUTPUT -p tcp -j MESHPERF_SERVICES\n",
		"-A MESHPERF_SERVICES -d 10.96.1.1/32 -p tcp -m tcp --dport 8080 -m statistic --mode random --probability 0.33333333 -j DNAT --to-destination 10.0.0.2:8080\n",
		"-A MESHPERF_SERVICES -d 10.96.1.1/32 -p tcp -m tcp --dport 8080 -m statistic --mode random --probability 0.50000000 -j DNAT --to-destination 10.0.0.3:8080\n",
		// The last endpoint takes what the others left, unconditionally.
		"-A MESHPERF_SERVICES -d 10.96.1.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.0.0.4:8080\n",
		"-A MESHPERF_SERVICES -d 10.96.1.2/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.0.0.5:8080\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rules lack %q:\n%s", want, got)
		}
	}
}

// A connection to the cluster IP from a pod with the rules reaches every
// endpoint over a few dozen connections, and nothing else; without them
// (Uncapture) nothing answers at the cluster IP.
func TestRouteServicesReachesEveryEndpoint(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "client", "a", "b")
	client, a, b := pods[0], pods[1], pods[2]
	for _, p := range []*Pod{a, b} {
		serveIn(t, p, netip.AddrPortFrom(p.IP(), 8080).String(), func(c net.Conn) { io.WriteString(c, c.LocalAddr().String()) })
	}
	vip := netip.AddrPortFrom(netip.MustParseAddr("10.96.1.1"), 8080)
	if err := client.RouteServices([]ServiceRoute{{VIP: vip.Addr(), Port: vip.Port(), Endpoints: []netip.Addr{a.IP(), b.IP()}}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 40 {
		got, err := dialRead(client, vip.String())
		if err != nil {
			t.Fatalf("dial %s from the client pod: %v", vip, err)
		}
		seen[got]++
	}
	for _, p := range []*Pod{a, b} {
		if seen[netip.AddrPortFrom(p.IP(), 8080).String()] == 0 {
			t.Errorf("40 connections to %s never reached %s: %v", vip, p.Name(), seen)
		}
	}
	if len(seen) != 2 {
		t.Errorf("connections reached %v, want only the two endpoints", seen)
	}
	if err := client.Uncapture(); err != nil {
		t.Fatal(err)
	}
	if got, err := dialReadWith(client, &net.Dialer{Timeout: 300 * time.Millisecond}, vip.String()); err == nil {
		t.Errorf("without the rules %s still answered %q", vip, got)
	}
}
