package generate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// This file routes a gateway's traffic: the VirtualServices bound to each
// server's Gateway whose hosts meet the server's, as HTTP routes over RDS, and
// as TCP proxies for TCP and TLS servers.

// tcpChain proxies a TCP server (or a TLS server, after terminating TLS) to
// the first tcp route, of the bound VirtualServices that share a host with it,
// whose match admits the server's port and Gateway: like istiod, one
// destination per server, as nothing in the connection tells routes apart.
func (b *gatewayBuild) tcpChain(s *gatewayServer, port uint32) ([]*listenerv3.FilterChain, error) {
	for i, vs := range b.in.VirtualServices {
		if !b.routesFor(i, s) {
			continue
		}
		for _, t := range vs.Spec.GetTcp() {
			if len(t.GetRoute()) == 0 || !l4Matches(t.GetMatch(), vs.Namespace, s.gateway, port) {
				continue
			}
			chain, err := b.tcpProxy(t.GetRoute(), vs.Namespace, port)
			if err != nil {
				return nil, err
			}
			if s.kind == serverTLS {
				chain.FilterChainMatch = serverNameMatch(sniHosts(s))
				if chain.TransportSocket, err = serverTLSContext(s.spec.GetTls()); err != nil {
					return nil, err
				}
			}
			return []*listenerv3.FilterChain{chain}, nil
		}
	}
	return nil, nil
}

// passthroughChains route a PASSTHROUGH server's connections by SNI: one
// chain per matching tls route match, on its sniHosts. A match whose SNI names
// an earlier one already claimed is skipped, as Envoy rejects two chains with
// the same match.
func (b *gatewayBuild) passthroughChains(s *gatewayServer, port uint32) ([]*listenerv3.FilterChain, error) {
	var out []*listenerv3.FilterChain
	claimed := map[string]bool{}
	for i, vs := range b.in.VirtualServices {
		if !b.routesFor(i, s) {
			continue
		}
		for _, t := range vs.Spec.GetTls() {
			if len(t.GetRoute()) == 0 {
				continue
			}
			for _, m := range t.GetMatch() {
				if !l4Matches([]*networking.L4MatchAttributes{{Port: m.GetPort(), Gateways: m.GetGateways()}}, vs.Namespace, s.gateway, port) {
					continue
				}
				if slices.ContainsFunc(m.GetSniHosts(), func(h string) bool { return claimed[h] }) {
					b.skipped = append(b.skipped, fmt.Sprintf("Gateway %s port %d: a tls route of a VirtualService in %s repeats SNI hosts %v",
						s.gateway, port, vs.Namespace, m.GetSniHosts()))
					continue
				}
				for _, h := range m.GetSniHosts() {
					claimed[h] = true
				}
				chain, err := b.tcpProxy(t.GetRoute(), vs.Namespace, port)
				if err != nil {
					return nil, err
				}
				chain.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: m.GetSniHosts()}
				out = append(out, chain)
			}
		}
	}
	return out, nil
}

// routesFor says whether VirtualService i routes server s: bound to its
// Gateway and sharing a host with it.
func (b *gatewayBuild) routesFor(i int, s *gatewayServer) bool {
	return b.vsBound[i][s.gateway] && len(intersectHosts(hostsFor(s.hosts, b.in.VirtualServices[i].Namespace), b.vsHosts[i])) > 0
}

// l4Matches says whether any of a TCP or TLS route's matches (none: all)
// admits the port and Gateway; the other conditions are about sidecars.
func l4Matches(matches []*networking.L4MatchAttributes, namespace, gateway string, port uint32) bool {
	if len(matches) == 0 {
		return true
	}
	for _, m := range matches {
		if (m.GetPort() == 0 || m.GetPort() == port) && gatewayListed(m.GetGateways(), namespace, gateway) {
			return true
		}
	}
	return false
}

// tcpProxy is a chain proxying to a route's destinations, weighted when there
// are several.
func (b *gatewayBuild) tcpProxy(dests []*networking.RouteDestination, namespace string, port uint32) (*listenerv3.FilterChain, error) {
	first := b.cluster(dests[0].GetDestination(), namespace, port)
	proxy := &tcpproxyv3.TcpProxy{StatPrefix: first, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: first}}
	if len(dests) > 1 {
		wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for _, d := range dests {
			wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{
				Name: b.cluster(d.GetDestination(), namespace, port), Weight: uint32(d.GetWeight()),
			})
		}
		proxy.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	return networkFilterChain(tcpProxyFilter, proxy)
}

// cluster names a destination's cluster. Its port is the destination's, else
// the service's when it has just one (istiod's rule), else the server's.
func (b *gatewayBuild) cluster(d *networking.Destination, namespace string, port uint32) string {
	host := qualify(d.GetHost(), namespace, b.in.DomainSuffix)
	if p := b.destinationPort(d, namespace); p != 0 {
		port = p
	}
	return ClusterName(outbound, port, d.GetSubset(), host)
}

func (b *gatewayBuild) destinationPort(d *networking.Destination, namespace string) uint32 {
	if p := d.GetPort().GetNumber(); p != 0 {
		return p
	}
	if svc := b.services[qualify(d.GetHost(), namespace, b.in.DomainSuffix)]; svc != nil && len(svc.Ports) == 1 {
		return svc.Ports[0].Number
	}
	return 0
}

// routeConfig is one RDS resource: a virtual host per host where a server of
// the route meets a VirtualService bound to its Gateway. Hosts no
// VirtualService routes get no virtual host, so Envoy answers 404; with none
// at all, istiod's empty blackhole host says so explicitly.
func (b *gatewayBuild) routeConfig(name string, servers []*gatewayServer) *routev3.RouteConfiguration {
	vhosts := map[string]*routev3.VirtualHost{}
	added := map[string]bool{} // host|VirtualService|Gateway: servers may repeat a host
	for _, s := range servers {
		port := s.spec.GetPort().GetNumber()
		redirect := s.spec.GetTls().GetHttpsRedirect()
		for i, vs := range b.in.VirtualServices {
			if !b.vsBound[i][s.gateway] {
				continue
			}
			hosts := intersectHosts(hostsFor(s.hosts, vs.Namespace), b.vsHosts[i])
			if len(hosts) == 0 {
				continue
			}
			routes, ok := b.httpRoutes(i, s.gateway, port)
			if !ok {
				continue
			}
			for _, h := range hosts {
				if key := h + "|" + strconv.Itoa(i) + "|" + s.gateway; !added[key] {
					added[key] = true
					vh := gatewayVirtualHost(vhosts, h, port)
					vh.Routes = append(vh.Routes, routes...)
				}
			}
		}
		if redirect {
			// httpsRedirect answers every host of the server with a redirect,
			// routed by a VirtualService or not.
			for _, h := range sniHosts(s) {
				gatewayVirtualHost(vhosts, h, port).RequireTls = routev3.VirtualHost_ALL
			}
		}
	}
	rc := &routev3.RouteConfiguration{Name: name, ValidateClusters: wrapperspb.Bool(false), IgnorePortInHostMatching: true}
	for _, vh := range vhosts {
		vh.Routes = catchAllLast(vh.Routes)
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	if len(rc.VirtualHosts) == 0 {
		port := strconv.FormatUint(uint64(servers[0].spec.GetPort().GetNumber()), 10)
		rc.VirtualHosts = []*routev3.VirtualHost{{Name: "blackhole:" + port, Domains: []string{"*"}}}
	}
	slices.SortFunc(rc.VirtualHosts, func(a, b *routev3.VirtualHost) int { return strings.Compare(a.Name, b.Name) })
	return rc
}

// gatewayVirtualHost returns the virtual host for a host, creating it: named
// HOST:PORT and matching the host with and without the port.
func gatewayVirtualHost(vhosts map[string]*routev3.VirtualHost, host string, port uint32) *routev3.VirtualHost {
	if vh, ok := vhosts[host]; ok {
		return vh
	}
	p := strconv.FormatUint(uint64(port), 10)
	domains := []string{host}
	if host != "*" {
		domains = append(domains, host+":"+p)
	}
	vh := &routev3.VirtualHost{Name: host + ":" + p, Domains: domains, IncludeRequestAttemptCount: true}
	vhosts[host] = vh
	return vh
}

// httpRoutes are VirtualService i's http routes for a Gateway's server on a
// port, built once per build; ok is false when there are none. A VirtualService that cannot be routed (such as
// a route without a destination, which meshperf does not route yet) is left
// out and listed, as istiod leaves it out.
func (b *gatewayBuild) httpRoutes(i int, gateway string, port uint32) ([]*routev3.Route, bool) {
	key := strconv.Itoa(i) + "|" + gateway + "|" + strconv.FormatUint(uint64(port), 10)
	if c, ok := b.routes[key]; ok {
		return c.routes, c.ok
	}
	vs := b.in.VirtualServices[i]
	routes, err := httpRoutes(b.forGateway(vs, gateway), nil, RouteInput{Port: port, DomainSuffix: b.in.DomainSuffix})
	if err != nil {
		b.skipped = append(b.skipped, fmt.Sprintf("VirtualService for %v in %s on Gateway %s: %v", vs.Spec.GetHosts(), vs.Namespace, gateway, err))
	}
	// Like istiod, a VirtualService with no http route for this server (a
	// TCP-only one, say) adds no virtual host, not even an empty one.
	ok := err == nil && len(routes) > 0
	b.routes[key] = routeCache{routes: routes, ok: ok}
	return routes, ok
}

// forGateway narrows a VirtualService's http routes to one Gateway: matches
// that name other gateways are dropped (and routes left with none), and
// destinations without a port get their single-port service's, so that the
// shared route builder names the clusters as istiod does.
func (b *gatewayBuild) forGateway(vs BoundVirtualService, gateway string) BoundVirtualService {
	spec := proto.Clone(vs.Spec).(*networking.VirtualService)
	var kept []*networking.HTTPRoute
	for _, hr := range spec.GetHttp() {
		if len(hr.GetMatch()) > 0 {
			hr.Match = slices.DeleteFunc(hr.Match, func(m *networking.HTTPMatchRequest) bool {
				return !gatewayListed(m.GetGateways(), vs.Namespace, gateway)
			})
			if len(hr.Match) == 0 {
				continue
			}
		}
		for _, d := range hr.GetRoute() {
			if p := b.destinationPort(d.GetDestination(), vs.Namespace); p != 0 && d.GetDestination() != nil {
				d.Destination.Port = &networking.PortSelector{Number: p}
			}
		}
		kept = append(kept, hr)
	}
	spec.Http = kept
	return BoundVirtualService{Namespace: vs.Namespace, Spec: spec}
}

// catchAllLast moves routes that match every request behind the others,
// keeping their order otherwise, as istiod does when it combines the routes of
// several VirtualServices for one host.
func catchAllLast(routes []*routev3.Route) []*routev3.Route {
	var specific, catchAll []*routev3.Route
	for _, r := range routes {
		m := r.GetMatch()
		if m.GetPrefix() == "/" && len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0 {
			catchAll = append(catchAll, r)
		} else {
			specific = append(specific, r)
		}
	}
	return append(specific, catchAll...)
}

// hostsFor are the server hosts a VirtualService in namespace ns can bind:
// "ns/host" only from that namespace, unqualified hosts from any.
func hostsFor(hosts []string, ns string) []string {
	var out []string
	for _, h := range hosts {
		if hostNS, dns, ok := strings.Cut(h, "/"); ok {
			if hostNS != ns {
				continue
			}
			h = dns
		}
		out = append(out, h)
	}
	return out
}

// intersectHosts returns, for each server host and VirtualService host that
// overlap, the narrower of the two (so *.example.com and a.example.com give
// a.example.com), once each.
func intersectHosts(server, vs []string) []string {
	var out []string
	for _, a := range server {
		for _, v := range vs {
			h := ""
			switch {
			case hostWithin(a, v):
				h = a
			case hostWithin(v, a):
				h = v
			}
			if h != "" && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// hostWithin says whether every name host a covers is covered by b: equal
// names, or b a wildcard (*.suffix, or *) whose suffix a ends in.
func hostWithin(a, b string) bool {
	if !strings.HasPrefix(b, "*") {
		return a == b
	}
	if strings.HasPrefix(a, "*") {
		return strings.HasSuffix(a[1:], b[1:])
	}
	return strings.HasSuffix(a, b[1:])
}
