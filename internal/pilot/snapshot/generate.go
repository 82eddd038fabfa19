package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
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

	// A Sidecar scope's listeners and routes are made on the first LDS or
	// RDS, not with its clusters: a push sends each proxy CDS first, and a
	// proxy whose scope is its own (a namespace's default scope) would
	// otherwise wait for its listeners and routes, two thirds of building
	// the scope's config, before its clusters went out. Gateways' and
	// waypoints' configs are made whole by once.
	listenersOnce sync.Once
	listenersErr  error
}

// Generate returns p's resources of typeURL: all of them, or those in names for
// endpoints, routes and secrets.
func (s *Snapshot) Generate(p *model.Proxy, typeURL string, names []string) ([]Resource, error) {
	switch {
	case p.Type == model.Ztunnel:
		return s.generateAmbient(typeURL)
	case typeURL == AddressType || typeURL == AuthorizationType:
		return nil, fmt.Errorf("type %s is served to node proxies (ztunnel) only, not to %s proxies", typeURL, p.Type)
	}
	sc := s.Scopes.For(p)
	switch p.Type {
	case model.Router:
		return s.generateGateway(p, sc, typeURL, names)
	case model.Waypoint:
		return s.generateWaypoint(p, sc, typeURL, names)
	}
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
		out, err := s.outboundListenersFor(sc)
		if err != nil {
			return nil, err
		}
		in, err := s.inboundListener(p)
		if err != nil {
			return nil, err
		}
		return append(slices.Clip(out.listeners), in), nil
	case RouteType:
		out, err := s.outboundListenersFor(sc)
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

// outboundFor generates (once per snapshot) a scope's imported services and
// outbound clusters.
func (s *Snapshot) outboundFor(sc *scope.SidecarScope) (*outboundConfig, error) {
	return s.cachedConfig(sc.ID(), func(out *outboundConfig) error { return s.buildOutbound(sc, out) })
}

// outboundListenersFor is outboundFor with the scope's outbound listeners
// and routes generated too (once per snapshot).
func (s *Snapshot) outboundListenersFor(sc *scope.SidecarScope) (*outboundConfig, error) {
	out, err := s.outboundFor(sc)
	if err != nil {
		return nil, err
	}
	out.listenersOnce.Do(func() { out.listenersErr = s.buildOutboundListeners(sc, out) })
	return out, out.listenersErr
}

// cachedConfig returns the config cached under key, building it on first
// use; every proxy that shares it gets the same encoded bytes.
func (s *Snapshot) cachedConfig(key string, build func(*outboundConfig) error) (*outboundConfig, error) {
	out := entryOf(&s.mu, s.outbound, key)
	out.once.Do(func() { out.err = build(out) })
	return out, out.err
}

// endpointsKey identifies a load assignment: the cluster, the namespace of
// the service it was resolved to (a host may have one in several), and for
// waypoints, which send other endpoints, the waypoint and its scope. A
// struct, not a string built per name: a push looks up every name of every
// proxy's EDS request.
type endpointsKey struct {
	cluster, namespace, waypoint string
}

// cachedEndpoints returns the load assignment cached under key, generating
// it on first use.
func (s *Snapshot) cachedEndpoints(key endpointsKey, generate func() (Resource, error)) (Resource, error) {
	s.mu.Lock()
	r, cached := s.endpoints[key]
	s.mu.Unlock()
	if cached {
		return r, nil
	}
	r, err := generate()
	if err != nil {
		return Resource{}, err
	}
	s.mu.Lock()
	s.endpoints[key] = r
	s.mu.Unlock()
	return r, nil
}

// subsetLabels are the labels of a DestinationRule subset; nil for no
// subset.
func subsetLabels(dr *networking.DestinationRule, subset string) map[string]string {
	if subset == "" {
		return nil
	}
	for _, ss := range dr.GetSubsets() {
		if ss.GetName() == subset {
			return ss.GetLabels()
		}
	}
	return nil
}

// boundVirtualServices are the scope's VirtualServices with their namespaces.
func boundVirtualServices(sc *scope.SidecarScope) []generate.BoundVirtualService {
	var out []generate.BoundVirtualService
	for _, r := range sc.VirtualServices() {
		if vs, ok := r.Spec.(*networking.VirtualService); ok {
			out = append(out, generate.BoundVirtualService{Namespace: r.Meta.Namespace, Spec: vs})
		}
	}
	return out
}

// encodeNamed encodes messages each under its own name.
func encodeNamed[M interface {
	proto.Message
	GetName() string
}](ms []M) ([]Resource, error) {
	out := make([]Resource, 0, len(ms))
	for _, m := range ms {
		r, err := encode(m.GetName(), m)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// buildOutbound finds a scope's imported services and makes its clusters.
func (s *Snapshot) buildOutbound(sc *scope.SidecarScope, out *outboundConfig) error {
	out.services = s.importedServices(sc)
	var err error
	out.clusters, err = s.outboundClusters(sc, out.services)
	return err
}

// buildOutboundListeners makes the listeners and routes of a scope whose
// services buildOutbound has found.
func (s *Snapshot) buildOutboundListeners(sc *scope.SidecarScope, out *outboundConfig) error {
	registryOnly := sc.OutboundTrafficPolicy == networking.OutboundTrafficPolicy_REGISTRY_ONLY
	var err error
	if out.listeners, err = s.outboundListeners(out.services, registryOnly); err != nil {
		return err
	}
	vss := boundVirtualServices(sc)
	out.routes = map[string]Resource{}
	for port, services := range httpServicesByPort(out.services) {
		rc, err := generate.OutboundRouteConfig(generate.RouteInput{
			Port: port, Services: services, VirtualServices: vss, ProxyNamespace: sc.Namespace,
			DomainSuffix: s.DomainSuffix, RegistryOnly: registryOnly, VirtualHosts: s.virtualHost,
		})
		if err != nil {
			return err
		}
		r, err := s.encodeRoutes(rc)
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

// destinationRules merges, for a host, the rules the scope applies, as Istio
// does: the oldest rule's traffic policy (or the first that has one), and every
// rule's subsets, the first of each name winning.
func (s *Snapshot) destinationRules(sc *scope.SidecarScope) generate.DestinationRules {
	return func(host string) *networking.DestinationRule {
		var merged *networking.DestinationRule
		for _, r := range sc.DestinationRules(host) {
			dr, ok := r.Spec.(*networking.DestinationRule)
			if !ok {
				continue
			}
			if merged == nil {
				merged = proto.Clone(dr).(*networking.DestinationRule)
				continue
			}
			if merged.GetTrafficPolicy() == nil {
				merged.TrafficPolicy = dr.GetTrafficPolicy()
			}
			for _, ss := range dr.GetSubsets() {
				if !slices.ContainsFunc(merged.Subsets, func(m *networking.Subset) bool { return m.GetName() == ss.GetName() }) {
					merged.Subsets = append(merged.Subsets, ss)
				}
			}
		}
		return merged
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
		r, err := s.cachedEndpoints(endpointsKey{cluster: name, namespace: imported.Namespace}, func() (Resource, error) {
			var eps []*model.Endpoint
			for _, svc := range s.Registry.ServicesByHostname(host) {
				if svc.Namespace == imported.Namespace {
					eps = s.Registry.Endpoints(svc, port)
				}
			}
			return encode(name, generate.LoadAssignment(name, eps, subsetLabels(drs(host), subset)))
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// inboundPorts are the ports of the services that select the proxy's workload.
func (s *Snapshot) inboundPorts(p *model.Proxy) []generate.InboundPort {
	seen := map[uint32]bool{}
	var out []generate.InboundPort
	for _, svc := range s.Registry.ServicesIn(p.Namespace) {
		if len(svc.Selector) == 0 || !hasLabels(p.Labels, svc.Selector) {
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
	ports := s.inboundPorts(p)
	return s.sharedInbound(inboundKey(inboundClustersKind, ports), func() ([]Resource, error) {
		clusters, err := generate.InboundClusters(ports)
		if err != nil {
			return nil, err
		}
		return encodeNamed(clusters)
	})
}

func (s *Snapshot) inboundListener(p *model.Proxy) (Resource, error) {
	ports := s.inboundPorts(p)
	policies := s.peerAuthenticationsFor(p.Namespace, p.Labels)
	for i := range ports {
		ports[i].MTLS = policies.mode(ports[i].Port)
	}
	rs, err := s.sharedInbound(inboundKey(inboundListenerKind, ports), func() ([]Resource, error) {
		l, err := generate.InboundListener(ports)
		if err != nil {
			return nil, err
		}
		r, err := encode(l.Name, l)
		return []Resource{r}, err
	})
	if err != nil {
		return Resource{}, err
	}
	return rs[0], nil
}

// peerAuthentications are the policies that apply to one workload, from the
// most specific: one in its namespace whose selector matches it, its
// namespace's, the mesh-wide one in the root namespace. Each level may leave
// the mode UNSET, inheriting from the next.
type peerAuthentications [3]*security.PeerAuthentication

func (s *Snapshot) peerAuthenticationsFor(namespace string, labels map[string]string) peerAuthentications {
	root := s.Scopes.RootNamespace()
	var levels peerAuthentications
	for _, r := range s.peerAuthentications { // oldest first: the first of a level wins
		pa, ok := r.Spec.(*security.PeerAuthentication)
		if !ok {
			continue
		}
		level := -1
		switch sel := pa.GetSelector().GetMatchLabels(); {
		case r.Meta.Namespace == namespace && len(sel) > 0 && hasLabels(labels, sel):
			level = 0
		case r.Meta.Namespace == namespace && len(sel) == 0:
			level = 1
		case r.Meta.Namespace == root && len(sel) == 0:
			level = 2
		}
		if level >= 0 && levels[level] == nil {
			levels[level] = pa
		}
	}
	return levels
}

// mode is the mTLS mode of one of the workload's ports: a port-level setting of
// the workload's own policy first (Istio allows them only there), then each
// level's mode, else PERMISSIVE.
func (l peerAuthentications) mode(port uint32) generate.MTLSMode {
	if m, ok := toMode(l[0].GetPortLevelMtls()[port].GetMode()); ok {
		return m
	}
	return l.workloadMode()
}

// workloadMode is the workload's mTLS mode apart from port-level settings:
// the most specific level's mode, else PERMISSIVE.
func (l peerAuthentications) workloadMode() generate.MTLSMode {
	for _, pa := range l {
		if m, ok := toMode(pa.GetMtls().GetMode()); ok {
			return m
		}
	}
	return generate.MTLSPermissive
}

func toMode(m security.PeerAuthentication_MutualTLS_Mode) (generate.MTLSMode, bool) {
	switch m {
	case security.PeerAuthentication_MutualTLS_STRICT:
		return generate.MTLSStrict, true
	case security.PeerAuthentication_MutualTLS_DISABLE:
		return generate.MTLSDisable, true
	case security.PeerAuthentication_MutualTLS_PERMISSIVE:
		return generate.MTLSPermissive, true
	}
	return 0, false // UNSET: inherit
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
