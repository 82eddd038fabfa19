package snapshot

import (
	"fmt"
	"slices"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// gatewayKeyPrefix keeps a gateway scope's generated config apart from any
// sidecar scope's in the snapshot's per-scope cache.
const gatewayKeyPrefix = "gateway|"

// generateGateway returns a gateway (router) proxy's resources of typeURL.
// A gateway has no capture listeners and no inbound side: its listeners are
// its Gateways' server ports, its routes the VirtualServices bound to them,
// and its clusters those of the services it imports. All but endpoints and
// secrets are generated once per gateway scope and shared, as for sidecars.
func (s *Snapshot) generateGateway(p *model.Proxy, sc *scope.SidecarScope, typeURL string, names []string) ([]Resource, error) {
	switch typeURL {
	case ClusterType, ListenerType, RouteType:
		out, err := s.gatewayFor(sc)
		if err != nil {
			return nil, err
		}
		switch typeURL {
		case ClusterType:
			return out.clusters, nil
		case ListenerType:
			return out.listeners, nil
		}
		return pick(out.routes, names), nil
	case EndpointType:
		return s.loadAssignments(sc, names)
	case SecretType:
		// The mesh certificate serves ISTIO_MUTUAL servers; credentialName
		// secrets (kubernetes://NAME) are not served yet.
		return s.secrets(p, names)
	}
	return nil, fmt.Errorf("type %s is not served", typeURL)
}

// gatewayFor generates (once per snapshot) a gateway scope's clusters,
// listeners and routes.
func (s *Snapshot) gatewayFor(sc *scope.SidecarScope) (*outboundConfig, error) {
	out, err := s.cachedConfig(gatewayKeyPrefix+sc.ID(), func(out *outboundConfig) error { return s.buildGateway(sc, out) })
	if err != nil {
		return nil, fmt.Errorf("gateway config for the proxies of %s: %w", sc.ID(), err)
	}
	return out, nil
}

func (s *Snapshot) buildGateway(sc *scope.SidecarScope, out *outboundConfig) error {
	out.services = s.importedServices(sc)
	clusters, err := s.outboundClusters(sc, out.services)
	if err != nil {
		return err
	}
	// Istio gives gateways no passthrough cluster: nothing reaches them
	// through an original-destination listener.
	out.clusters = slices.DeleteFunc(clusters, func(r Resource) bool { return r.Name == generate.PassthroughCluster })
	in := generate.GatewayInput{Services: out.services, DomainSuffix: s.DomainSuffix}
	for _, r := range sc.Gateways {
		if gw, ok := r.Spec.(*networking.Gateway); ok {
			in.Gateways = append(in.Gateways, generate.Gateway{Name: r.Meta.Name, Namespace: r.Meta.Namespace, Spec: gw})
		}
	}
	in.VirtualServices = boundVirtualServices(sc)
	res, err := generate.BuildGateway(in)
	if err != nil {
		return err
	}
	if out.listeners, err = encodeNamed(res.Listeners); err != nil {
		return err
	}
	out.routes = map[string]Resource{}
	for _, rc := range res.Routes {
		r, err := encode(rc.Name, rc)
		if err != nil {
			return err
		}
		out.routes[rc.Name] = r
	}
	return nil
}
