package scope

import (
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// catchAll is the egress listener of a Sidecar without egress, and of the
// default scope: every host exported to the namespace.
var catchAll = &networking.IstioEgressListener{Hosts: []string{"*/*"}}

// newScope returns an empty scope; sizeHint is the expected number of imported
// services, to size its maps once (building scopes is dominated by map growth:
// the per-namespace maps, grown entry by entry, were 40% of building a scope
// that imports 100 namespaces).
func (ix *Index) newScope(id, ns string, sizeHint int) *SidecarScope {
	nsHint := min(sizeHint, ix.serviceNamespaces)
	return &SidecarScope{
		id:                    id,
		Namespace:             ns,
		RootNamespace:         ix.rootNamespace,
		OutboundTrafficPolicy: ix.meshPolicy,
		byHost:                make(map[string]*Service, sizeHint),
		destinationRules:      map[string][]*config.Resource{},
		deps:                  make(map[config.Key]struct{}, 3*sizeHint),
		serviceNamespaces:     make(map[string]struct{}, nsHint),
		namespaces:            make(map[string]struct{}, nsHint),
		selectors:             make(map[string][]map[string]string, nsHint),
		workloadLabels:        ix.workloadLabels,
	}
}

// buildSidecarScope computes the scope of proxies in namespace ns to which
// sidecar applies (nil: the default scope).
func (ix *Index) buildSidecarScope(id, ns string, sidecar *config.Resource) *SidecarScope {
	spec := sidecarSpec(sidecar)
	egress := spec.GetEgress()
	if len(egress) == 0 {
		egress = []*networking.IstioEgressListener{catchAll}
	}
	listeners := make([]*EgressListener, len(egress))
	sizeHint := 0
	for i, e := range egress {
		listeners[i] = ix.buildListener(ns, e)
		sizeHint += len(listeners[i].Services)
	}
	sc := ix.newScope(id, ns, sizeHint)
	if sidecar != nil {
		sc.Sidecar = sidecar
		sc.deps[sidecar.Key()] = struct{}{}
		if p := spec.GetOutboundTrafficPolicy(); p != nil {
			sc.OutboundTrafficPolicy = p.GetMode()
		}
	}
	seenVS := map[config.Key]bool{}
	sc.Egress = listeners
	for _, l := range listeners {
		for _, s := range l.Services {
			sc.addService(s)
		}
		for _, vs := range l.VirtualServices {
			if !seenVS[vs.Key()] {
				seenVS[vs.Key()] = true
				sc.addVirtualService(vs)
			}
		}
	}
	// Like istiod, services a listener's VirtualServices route to are imported
	// even when the egress hosts do not name them; explicit imports win.
	for i, e := range egress {
		port := listenerPort(e)
		for _, vs := range sc.Egress[i].routes {
			for _, h := range vs.dests {
				if s := ix.pickDestination(h, ns); s != nil && (port == 0 || slices.Contains(s.Ports, port)) {
					sc.addService(s)
				}
			}
		}
	}
	ix.addDestinationRules(sc)
	return sc
}

// buildListener resolves one egress listener's hosts in namespace ns.
func (ix *Index) buildListener(ns string, e *networking.IstioEgressListener) *EgressListener {
	l := &EgressListener{Port: e.GetPort().GetNumber(), Bind: e.GetBind(), Hosts: e.GetHosts()}
	hosts := parseEgressHosts(e.GetHosts(), ns)
	port := listenerPort(e)

	var imported []*Service
	for _, s := range ix.candidates(hosts) {
		if !s.ExportTo.Allows(s.Namespace, ns) || !importsService(hosts, s) {
			continue
		}
		if port != 0 && !slices.Contains(s.Ports, port) {
			continue
		}
		imported = append(imported, s)
	}
	l.Services = imported
	if ix.hostShared {
		l.Services = onePerHostname(imported, ns)
	}

	for _, vs := range ix.virtualServices {
		if !vs.gateways[meshGateway] || !vs.exportTo.Allows(vs.key.Namespace, ns) {
			continue
		}
		if importsRoute(hosts[vs.key.Namespace], vs.hosts) || importsRoute(hosts["*"], vs.hosts) {
			l.VirtualServices = append(l.VirtualServices, vs.res)
			l.routes = append(l.routes, vs)
		}
	}
	return l
}

// candidates are the services egress hosts may import, oldest first:
// every service when a host names any namespace ("*/..."), else those of
// the namespaces the hosts name (importsService looks at no other).
func (ix *Index) candidates(hosts map[string][]string) []*Service {
	if _, all := hosts["*"]; all {
		return ix.services
	}
	switch len(hosts) {
	case 0:
		return nil
	case 1:
		for ns := range hosts {
			return ix.servicesIn[ns]
		}
	}
	var out []*Service
	for ns := range hosts {
		out = append(out, ix.servicesIn[ns]...)
	}
	slices.SortFunc(out, func(a, b *Service) int { return ix.servicePosition[a] - ix.servicePosition[b] })
	return out
}

// listenerPort is the port services must have to be imported by the
// listener: 0 for the catch-all listener and for an HTTP_PROXY listener, which
// istiod uses as a plain egress proxy for every port.
func listenerPort(e *networking.IstioEgressListener) uint32 {
	if strings.EqualFold(e.GetPort().GetProtocol(), "HTTP_PROXY") {
		return 0
	}
	return e.GetPort().GetNumber()
}

// parseEgressHosts groups egress hosts ns/dnsName by namespace, with "." read
// as ns. Hosts in the "~" namespace import nothing and are dropped, as are
// malformed ones (istiod logs and skips them; validation rejects them).
func parseEgressHosts(hosts []string, ns string) map[string][]string {
	out := map[string][]string{}
	for _, h := range hosts {
		hns, name, ok := strings.Cut(h, "/")
		if !ok || hns == "" || name == "" || strings.Contains(name, "/") || hns == "~" {
			continue
		}
		if hns == "." {
			hns = ns
		}
		out[hns] = append(out[hns], name)
	}
	return out
}

// importsService applies istiod's rule: the service's own namespace's egress
// hosts are tried first, then those of the "*" namespace, and the service's
// hostname must be a subset of one of them.
func importsService(hosts map[string][]string, s *Service) bool {
	for _, h := range hosts[s.Namespace] {
		if hostSubsetOf(s.Hostname, h) {
			return true
		}
	}
	for _, h := range hosts["*"] {
		if hostSubsetOf(s.Hostname, h) {
			return true
		}
	}
	return false
}

// importsRoute says whether any of a VirtualService's hosts shares a name with
// an egress host (istiod's two-way match for non-Gateway-API routes).
func importsRoute(egress, vsHosts []string) bool {
	for _, e := range egress {
		for _, h := range vsHosts {
			if hostMatches(h, e) {
				return true
			}
		}
	}
	return false
}

// onePerHostname keeps one service per hostname, like istiod: the one in the
// proxies' namespace, else a Kubernetes Service over a ServiceEntry, else the
// oldest. The result keeps the input order.
func onePerHostname(services []*Service, ns string) []*Service {
	chosen := map[string]*Service{}
	for _, s := range services {
		cur, ok := chosen[s.Hostname]
		if !ok || preferService(s, cur, ns) {
			chosen[s.Hostname] = s
		}
	}
	out := services[:0:0]
	for _, s := range services {
		if chosen[s.Hostname] == s {
			out = append(out, s)
		}
	}
	return out
}

func preferService(s, cur *Service, ns string) bool {
	if cur.Namespace == ns {
		return false
	}
	return s.Namespace == ns || (s.Kubernetes && !cur.Kubernetes)
}

// pickDestination resolves a route destination host to a service visible in
// ns: the one in ns, else the one in the alphabetically first namespace that
// exports it to ns (istiod's choice).
func (ix *Index) pickDestination(host, ns string) *Service {
	var best *Service
	for _, s := range ix.servicesByHost[host] {
		if !s.ExportTo.Allows(s.Namespace, ns) {
			continue
		}
		if s.Namespace == ns {
			return s
		}
		if best == nil || s.Namespace < best.Namespace {
			best = s
		}
	}
	return best
}

func (sc *SidecarScope) addService(s *Service) {
	if _, ok := sc.byHost[s.Hostname]; ok {
		return
	}
	sc.byHost[s.Hostname] = s
	sc.services = append(sc.services, s)
	sc.deps[s.Key] = struct{}{}
	sc.serviceNamespaces[s.Namespace] = struct{}{}
	sc.namespaces[s.Namespace] = struct{}{}
	if len(s.Selector) > 0 {
		sc.selectors[s.Namespace] = append(sc.selectors[s.Namespace], s.Selector)
	}
}

func (sc *SidecarScope) addVirtualService(vs *config.Resource) {
	sc.virtualServices = append(sc.virtualServices, vs)
	sc.deps[vs.Key()] = struct{}{}
	sc.namespaces[vs.Meta.Namespace] = struct{}{}
}

// addDestinationRules looks up the rules of every imported service.
func (ix *Index) addDestinationRules(sc *SidecarScope) {
	for _, s := range sc.services {
		drs := ix.destinationRulesFor(sc.Namespace, s)
		if len(drs) == 0 {
			continue
		}
		sc.destinationRules[s.Hostname] = drs
		for _, dr := range drs {
			sc.deps[dr.Key()] = struct{}{}
			sc.namespaces[dr.Meta.Namespace] = struct{}{}
		}
	}
}

// destinationRulesFor follows istiod's lookup for a client in namespace ns:
// rules visible to ns in ns itself, then in the service's namespace, then in
// the root namespace; in the first of these with a match, the most specific
// host (exact, else the longest wildcard) wins, with every rule for it.
func (ix *Index) destinationRulesFor(ns string, s *Service) []*config.Resource {
	for i, owner := range []string{ns, s.Namespace, ix.rootNamespace} {
		if (i == 1 && owner == ns) || (i == 2 && (owner == ns || owner == s.Namespace)) {
			continue
		}
		best := ""
		var out []*config.Resource
		for _, dr := range ix.destRules[owner] {
			if !dr.exportTo.Allows(owner, ns) || !hostSubsetOf(s.Hostname, dr.host) {
				continue
			}
			switch {
			case best == "" || moreSpecific(dr.host, best):
				best, out = dr.host, []*config.Resource{dr.res}
			case dr.host == best:
				out = append(out, dr.res)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// moreSpecific says whether host pattern a is a closer match than b: exact
// beats wildcard, a longer wildcard beats a shorter one.
func moreSpecific(a, b string) bool {
	aw, bw := isWildcard(a), isWildcard(b)
	if aw != bw {
		return !aw
	}
	return len(a) > len(b)
}
