package scope

import (
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// buildGatewayScope computes the scope of gateway proxies in namespace ns
// selected by gws. Gateways ignore Sidecars. They import, like istiod's
// default for gateways, every service exported to their namespace, or with
// FilterGatewayClusterConfig only the destinations of their VirtualServices;
// their routes are the VirtualServices bound to their Gateways and exported to
// their namespace; DestinationRules are looked up as for sidecars.
func (ix *Index) buildGatewayScope(id, ns string, gws []*config.Resource) *SidecarScope {
	sc := ix.newScope(id, ns, len(ix.services))
	sc.gateway = true
	sc.Gateways = gws
	bound := make(map[string]bool, len(gws))
	for _, g := range gws {
		bound[g.Meta.Namespace+"/"+g.Meta.Name] = true
		sc.deps[g.Key()] = struct{}{}
		sc.namespaces[g.Meta.Namespace] = struct{}{}
	}

	var routes []*vsEntry
	for _, vs := range ix.virtualServices {
		if !vs.exportTo.Allows(vs.key.Namespace, ns) {
			continue
		}
		for g := range vs.gateways {
			if bound[g] {
				routes = append(routes, vs)
				sc.addVirtualService(vs.res)
				break
			}
		}
	}

	if ix.filterGateway {
		for _, vs := range routes {
			for _, h := range vs.dests {
				if s := ix.pickDestination(h, ns); s != nil {
					sc.addService(s)
				}
			}
		}
	} else {
		var visible []*Service
		for _, s := range ix.services {
			if s.ExportTo.Allows(s.Namespace, ns) {
				visible = append(visible, s)
			}
		}
		for _, s := range onePerHostname(visible, ns) {
			sc.addService(s)
		}
	}
	ix.addDestinationRules(sc)
	return sc
}
