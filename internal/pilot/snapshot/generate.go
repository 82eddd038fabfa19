package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// outboundConfig is what every proxy of one Sidecar scope shares, generated on
// first use.
type outboundConfig struct {
	once      sync.Once
	err       error
	services  []*model.Service
	clusters  []Resource
	listeners []Resource
	routes    map[string]Resource // by route config name (the port)
}

// Generate returns p's resources of typeURL: all of them, or those in names for
// endpoints, routes and secrets.
func (s *Snapshot) Generate(p *model.Proxy, typeURL string, names []string) ([]Resource, error) {
	sc := s.Scopes.For(p)
	switch typeURL {
	case ClusterType:
		out, err := s.outboundFor(sc)
		if err != nil {
			return nil, err
		}
		inbound, err := s.inboundClusters(p)
		if err != nil {
			return nil, err
		}
		return append(slices.Clip(out.clusters), inbound...), nil
	case ListenerType:
		out, err := s.outboundFor(sc)
		if err != nil {
			return nil, err
		}
		in, err := s.inboundListener(p)
		if err != nil {
			return nil, err
		}
		return append(slices.Clip(out.listeners), in), nil
	case RouteType:
		out, err := s.outboundFor(sc)
		if err != nil {
			return nil, err
		}
		return pick(out.routes, names), nil
	case EndpointType:
		return s.loadAssignments(sc, names)
	case SecretType:
		return s.secrets(p, names)
	}
	return nil, fmt.Errorf("type %s is not served", typeURL)
}

// pick returns the named resources (all when names is empty), sorted by name.
func pick(all map[string]Resource, names []string) []Resource {
	var out []Resource
	if len(names) == 0 {
		for _, r := range all {
			out = append(out, r)
		}
	} else {
		for _, n := range names {
			if r, ok := all[n]; ok {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// outboundFor generates (once per snapshot) a scope's outbound clusters,
// listeners and routes.
func (s *Snapshot) outboundFor(sc *scope.SidecarScope) (*outboundConfig, error) {
	s.mu.Lock()
	out, ok := s.outbound[sc.ID()]
	if !ok {
		out = &outboundConfig{}
		s.outbound[sc.ID()] = out
	}
	s.mu.Unlock()
	out.once.Do(func() { out.err = s.buildOutbound(sc, out) })
	return out, out.err
}

func (s *Snapshot) buildOutbound(sc *scope.SidecarScope, out *outboundConfig) error {
	out.services = s.importedServices(sc)
	registryOnly := sc.OutboundTrafficPolicy == networking.OutboundTrafficPolicy_REGISTRY_ONLY
	clusters, err := generate.OutboundClusters(out.services, s.destinationRules(sc))
	if err != nil {
		return err
	}
	for _, c := range clusters {
		r, err := encode(c.Name, c)
		if err != nil {
			return err
		}
		out.clusters = append(out.clusters, r)
	}
	listeners, err := generate.OutboundListeners(out.services, registryOnly)
	if err != nil {
		return err
	}
	for _, l := range listeners {
		r, err := encode(l.Name, l)
		if err != nil {
			return err
		}
		out.listeners = append(out.listeners, r)
	}
	var vss []generate.BoundVirtualService
	for _, r := range sc.VirtualServices() {
		if vs, ok := r.Spec.(*networking.VirtualService); ok {
			vss = append(vss, generate.BoundVirtualService{Namespace: r.Meta.Namespace, Spec: vs})
		}
	}
	out.routes = map[string]Resource{}
	for port, services := range httpServicesByPort(out.services) {
		rc, err := generate.OutboundRouteConfig(generate.RouteInput{
			Port: port, Services: services, VirtualServices: vss, ProxyNamespace: sc.Namespace,
			DomainSuffix: s.DomainSuffix, RegistryOnly: registryOnly,
		})
		if err != nil {
			return err
		}
		r, err := encode(rc.Name, rc)
		if err != nil {
			return err
		}
		out.routes[rc.Name] = r
	}
	return nil
}

// importedServices are the registry's services for what the scope imports.
func (s *Snapshot) importedServices(sc *scope.SidecarScope) []*model.Service {
	var out []*model.Service
	for _, ss := range sc.Services() {
		for _, svc := range s.Registry.ServicesByHostname(ss.Hostname) {
			if svc.Namespace == ss.Namespace {
				out = append(out, svc)
				break
			}
		}
	}
	return out
}

func httpServicesByPort(services []*model.Service) map[uint32][]*model.Service {
	out := map[uint32][]*model.Service{}
	for _, svc := range services {
		for _, p := range svc.Ports {
			if isHTTP(p.Protocol) {
				out[p.Number] = append(out[p.Number], svc)
			}
		}
	}
	return out
}

func isHTTP(p model.Protocol) bool {
	switch p {
	case "HTTP", "HTTP2", "GRPC", "GRPC-WEB":
		return true
	}
	return false
}

// destinationRules picks, for a host, the oldest of the rules the scope applies
// (Istio merges several; meshperf takes the first, for now).
func (s *Snapshot) destinationRules(sc *scope.SidecarScope) generate.DestinationRules {
	return func(host string) *networking.DestinationRule {
		for _, r := range sc.DestinationRules(host) {
			if dr, ok := r.Spec.(*networking.DestinationRule); ok {
				return dr
			}
		}
		return nil
	}
}

// loadAssignments are the endpoints of the named outbound clusters, each
// generated once per snapshot.
func (s *Snapshot) loadAssignments(sc *scope.SidecarScope, names []string) ([]Resource, error) {
	drs := s.destinationRules(sc)
	var out []Resource
	for _, name := range names {
		dir, port, subset, host, ok := generate.ParseClusterName(name)
		if !ok || dir != "outbound" {
			continue
		}
		imported := sc.Service(host)
		if imported == nil {
			continue
		}
		key := name + "@" + imported.Namespace
		s.mu.Lock()
		r, cached := s.endpoints[key]
		s.mu.Unlock()
		if !cached {
			var labels map[string]string
			if subset != "" {
				for _, ss := range drs(host).GetSubsets() {
					if ss.GetName() == subset {
						labels = ss.GetLabels()
					}
				}
			}
			var eps []*model.Endpoint
			for _, svc := range s.Registry.ServicesByHostname(host) {
				if svc.Namespace == imported.Namespace {
					eps = s.Registry.Endpoints(svc, port)
				}
			}
			var err error
			if r, err = encode(name, generate.LoadAssignment(name, eps, labels)); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.endpoints[key] = r
			s.mu.Unlock()
		}
		out = append(out, r)
	}
	return out, nil
}

// inboundPorts are the ports of the services that select the proxy's workload.
func (s *Snapshot) inboundPorts(p *model.Proxy) []generate.InboundPort {
	seen := map[uint32]bool{}
	var out []generate.InboundPort
	for _, svc := range s.Registry.Services {
		if svc.Namespace != p.Namespace || len(svc.Selector) == 0 || !hasLabels(p.Labels, svc.Selector) {
			continue
		}
		for _, port := range svc.Ports {
			target := port.Number
			if port.TargetPort != 0 {
				target = port.TargetPort
			}
			if !seen[target] {
				seen[target] = true
				out = append(out, generate.InboundPort{Port: target, Protocol: port.Protocol})
			}
		}
	}
	slices.SortFunc(out, func(a, b generate.InboundPort) int { return cmp.Compare(a.Port, b.Port) })
	return out
}

func (s *Snapshot) inboundClusters(p *model.Proxy) ([]Resource, error) {
	var out []Resource
	for _, c := range generate.InboundClusters(s.inboundPorts(p)) {
		r, err := encode(c.Name, c)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Snapshot) inboundListener(p *model.Proxy) (Resource, error) {
	l, err := generate.InboundListener(s.inboundPorts(p), s.mtlsMode(p))
	if err != nil {
		return Resource{}, err
	}
	return encode(l.Name, l)
}

// mtlsMode is the PeerAuthentication that applies to the proxy's workload: one
// in its namespace whose selector matches it, else its namespace's, else the
// mesh-wide one in the root namespace, else PERMISSIVE. (Port-level modes are
// not applied yet.)
func (s *Snapshot) mtlsMode(p *model.Proxy) generate.MTLSMode {
	root := s.Scopes.RootNamespace()
	var workload, namespace, mesh *security.PeerAuthentication
	for _, r := range s.peerAuthentications {
		pa, ok := r.Spec.(*security.PeerAuthentication)
		if !ok {
			continue
		}
		switch sel := pa.GetSelector().GetMatchLabels(); {
		case r.Meta.Namespace == p.Namespace && len(sel) > 0 && hasLabels(p.Labels, sel):
			workload = firstOf(workload, pa)
		case r.Meta.Namespace == p.Namespace && len(sel) == 0:
			namespace = firstOf(namespace, pa)
		case r.Meta.Namespace == root && len(sel) == 0:
			mesh = firstOf(mesh, pa)
		}
	}
	for _, pa := range []*security.PeerAuthentication{workload, namespace, mesh} {
		switch pa.GetMtls().GetMode() {
		case security.PeerAuthentication_MutualTLS_STRICT:
			return generate.MTLSStrict
		case security.PeerAuthentication_MutualTLS_DISABLE:
			return generate.MTLSDisable
		case security.PeerAuthentication_MutualTLS_PERMISSIVE:
			return generate.MTLSPermissive
		}
		// UNSET inherits from the next level up.
	}
	return generate.MTLSPermissive
}

func firstOf(a, b *security.PeerAuthentication) *security.PeerAuthentication {
	if a != nil {
		return a
	}
	return b
}

// secrets are the proxy's workload certificate and the mesh root.
func (s *Snapshot) secrets(p *model.Proxy, names []string) ([]Resource, error) {
	if s.CA == nil {
		return nil, nil
	}
	if len(names) == 0 {
		names = []string{generate.WorkloadSecret, generate.RootSecret}
	}
	var out []Resource
	for _, n := range names {
		switch n {
		case generate.RootSecret:
			r, err := encode(n, s.CA.RootSecret())
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		case generate.WorkloadSecret:
			sa := p.ServiceAccount
			if sa == "" {
				sa = "default"
			}
			w, err := s.CA.Get(p.Namespace, sa)
			if err != nil {
				return nil, fmt.Errorf("certificate for %s/%s: %w", p.Namespace, sa, err)
			}
			r, err := encode(n, w.SDSSecret())
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
