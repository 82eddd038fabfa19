package snapshot

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// waypointKeyPrefix keeps a waypoint's generated config apart from the
// sidecar and gateway scopes' in the snapshot's per-scope cache.
const waypointKeyPrefix = "waypoint|"

// waypointOf is the Gateway a waypoint proxy was deployed for: the one its
// gateway-name label names in its namespace. Nil when that Gateway does not
// exist (yet): the proxy then gets a waypoint that serves nothing, and its
// config when the Gateway is applied.
func (s *Snapshot) waypointOf(p *model.Proxy) *waypoint {
	return s.waypoints[waypointKey{p.Namespace, p.Labels[config.GatewayNameLabel]}]
}

// generateWaypoint returns a waypoint proxy's resources of typeURL. Its
// routes are inline in its listeners, so it is sent no RDS.
func (s *Snapshot) generateWaypoint(p *model.Proxy, sc *scope.SidecarScope, typeURL string, names []string) ([]Resource, error) {
	switch typeURL {
	case RouteType:
		return nil, nil
	case SecretType:
		return s.secrets(p, names)
	case ClusterType, ListenerType, EndpointType:
	default:
		return nil, fmt.Errorf("type %s is not served", typeURL)
	}
	wp := s.waypointOf(p)
	out, err := s.waypointFor(wp, sc)
	if err != nil {
		return nil, err
	}
	if typeURL == ClusterType {
		return out.clusters, nil
	} else if typeURL == ListenerType {
		return out.listeners, nil
	}
	return s.waypointLoadAssignments(wp, out, sc, names)
}

// WaypointDigest identifies what a waypoint proxy is sent from this
// snapshot (clusters, listeners and every endpoint of its clusters): a push
// between two snapshots with the same digest can skip it.
func (s *Snapshot) WaypointDigest(p *model.Proxy) (string, error) {
	sc := s.Scopes.For(p)
	wp := s.waypointOf(p)
	out, err := s.waypointFor(wp, sc)
	if err != nil {
		return "", err
	}
	var names []string
	for _, c := range out.clusters {
		names = append(names, c.Name)
	}
	eds, err := s.waypointLoadAssignments(wp, out, sc, names)
	if err != nil {
		return "", err
	}
	return digest(out.clusters, out.listeners, eds), nil
}

// waypointFor generates (once per snapshot) the clusters and listeners of
// the proxies of one waypoint in one scope (which says the VirtualServices
// and DestinationRules they see).
func (s *Snapshot) waypointFor(wp *waypoint, sc *scope.SidecarScope) (*outboundConfig, error) {
	id := "-"
	if wp != nil {
		id = wp.namespace + "/" + wp.name
	}
	out, err := s.cachedConfig(waypointKeyPrefix+id+"|"+sc.ID(), func(out *outboundConfig) error { return s.buildWaypoint(wp, sc, out) })
	if err != nil {
		return nil, fmt.Errorf("waypoint config for %s: %w", id, err)
	}
	return out, nil
}

func (s *Snapshot) buildWaypoint(wp *waypoint, sc *scope.SidecarScope, out *outboundConfig) error {
	out.services = s.waypointServices(wp)
	in := generate.WaypointInput{
		Services: out.services, Rules: s.destinationRules(sc),
		Namespace: sc.Namespace, DomainSuffix: s.DomainSuffix,
	}
	in.VirtualServices = boundVirtualServices(sc)
	cfg, err := generate.BuildWaypoint(in)
	if err != nil {
		return err
	}
	if out.clusters, err = encodeNamed(cfg.Clusters); err != nil {
		return err
	}
	out.listeners, err = encodeNamed(cfg.Listeners)
	return err
}

// waypointServices are the services bound to the waypoint that it serves:
// those it takes service traffic for, with a VIP to be addressed by (the
// CONNECT authority ztunnel sends is VIP:PORT) and workloads as endpoints.
func (s *Snapshot) waypointServices(wp *waypoint) []*model.Service {
	if wp == nil || !wp.servesTraffic(config.WaypointForService) {
		return nil
	}
	var out []*model.Service
	for _, svc := range s.Registry.Services {
		if svc.Resolution != model.ResolveStatic || len(svc.Addresses) == 0 {
			continue
		}
		if s.boundWaypoint(svc.Namespace, svc.Labels) == wp {
			out = append(out, svc)
		}
	}
	return out
}

// waypointLoadAssignments are the endpoints of the named clusters of a
// waypoint, each generated once per snapshot.
func (s *Snapshot) waypointLoadAssignments(wp *waypoint, out *outboundConfig, sc *scope.SidecarScope, names []string) ([]Resource, error) {
	drs := s.destinationRules(sc)
	var res []Resource
	for _, name := range names {
		dir, port, subset, host, ok := generate.ParseClusterName(name)
		if !ok || dir != "outbound" {
			continue
		}
		for _, svc := range out.services {
			if svc.Hostname != host {
				continue
			}
			key := endpointsKey{cluster: name, namespace: svc.Namespace, waypoint: waypointKeyPrefix + wp.namespace + "/" + wp.name + "|" + sc.ID()}
			r, err := s.cachedEndpoints(key, func() (Resource, error) {
				eps := s.Registry.Endpoints(svc, port)
				return encode(name, generate.WaypointLoadAssignment(name, eps, subsetLabels(drs(host), subset)))
			})
			if err != nil {
				return nil, err
			}
			res = append(res, r)
			break
		}
	}
	return res, nil
}
