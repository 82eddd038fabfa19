package pod

import (
	"fmt"
	"net/netip"
	"strings"
)

// ServicesChain is the nat chain that stands in for kube-proxy in a pod
// without a mesh: a connection to a Service's cluster IP is sent to one of
// its pods.
const ServicesChain = "MESHPERF_SERVICES"

// ServiceRoute is one Service as kube-proxy sees it: its cluster IP and
// port, and the addresses of its pods (which listen on the same port).
type ServiceRoute struct {
	VIP       netip.Addr
	Port      uint16
	Endpoints []netip.Addr
}

// ServiceRules renders, as iptables-restore input for the nat table, what
// kube-proxy's iptables mode does for each Service in a pod's namespace: a
// TCP connection opened to VIP:Port is DNATed to one endpoint, chosen at
// random with equal chances (rule i of n matches with probability 1/(n-i),
// the last always, as kube-proxy writes it). nat decides on a connection's
// first packet, so every request of a kept-alive connection goes to the
// same endpoint, as with kube-proxy.
//
// Only a pod without a mesh has these rules: they replace the whole nat
// table, Istio's capture included, so a pod with a sidecar or in ambient
// keeps its capture and lets its proxy pick the endpoint, as in Kubernetes
// where capture redirects the connection before kube-proxy's DNAT could.
func ServiceRules(services []ServiceRoute) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("*nat")
	for _, c := range []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"} {
		w(":%s ACCEPT [0:0]", c)
	}
	w(":%s - [0:0]", ServicesChain)
	w("-A OUTPUT -p tcp -j %s", ServicesChain)
	for _, s := range services {
		n := len(s.Endpoints)
		for i, ep := range s.Endpoints {
			match := fmt.Sprintf("-A %s -d %s/32 -p tcp -m tcp --dport %d", ServicesChain, s.VIP, s.Port)
			if left := n - i; left > 1 {
				match += fmt.Sprintf(" -m statistic --mode random --probability %.8f", 1/float64(left))
			}
			w("%s -j DNAT --to-destination %s", match, netip.AddrPortFrom(ep, s.Port))
		}
	}
	w("COMMIT")
	return b.String()
}

// RouteServices installs ServiceRules in the pod's namespace, atomically,
// replacing any capture it had: what a pod without a mesh needs to reach
// Services by their cluster IPs. Uncapture removes them.
func (p *Pod) RouteServices(services []ServiceRoute) error {
	if p.kind != KindNetns {
		return fmt.Errorf("pod %s: %w", p.name, ErrCaptureNeedsNetns)
	}
	if err := p.checkOpen(); err != nil {
		return err
	}
	return applyCapture(p, ServiceRules(services))
}
