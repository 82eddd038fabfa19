// Package scope decides which configuration a proxy sees and depends on:
// Istio's Sidecar scoping and the discoverySelectors namespace filter.
//
// An Index is built once per push snapshot. It resolves every connected proxy
// to a SidecarScope: the services, VirtualServices and DestinationRules the
// proxy imports, chosen by the Sidecar that applies to it (or by the default of
// importing everything exported to its namespace). Scopes are shared: all
// proxies resolved the same way hold the same pointer, so generated config can
// be built once per scope. The push pipeline asks a scope whether it
// DependsOn a changed object; a change nothing in the scope depends on must not
// push to the proxy, which is why a mesh-wide Sidecar cuts pushes and config
// size.
//
// Like istiod, a scope only knows the snapshot it was built from. An object
// that was deleted, or a Sidecar that stopped applying, is only visible in
// the previous snapshot's scope, so callers keep each proxy's previous scope
// and use NeedsPush(prev, cur, keys), as istiod does with PrevSidecarScope.
package scope

import (
	"slices"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// SidecarScope is what one group of proxies sees: the Sidecar that applies to
// them (if any), what its egress listeners import, and what they depend on.
// It is immutable once built and shared between proxies.
type SidecarScope struct {
	id string
	// Namespace is the namespace of the proxies the scope serves. For the
	// mesh-wide Sidecar it is the proxy's, not the root namespace: "." in its
	// egress hosts and exportTo checks refer to the proxy's namespace, so each
	// namespace gets its own scope, as in istiod.
	Namespace string
	// RootNamespace is the mesh's root configuration namespace.
	RootNamespace string
	// Sidecar is the applied Sidecar; nil for the default scope and gateways.
	Sidecar *config.Resource
	// Gateways are the Gateways selecting the proxies; gateway scopes only.
	Gateways []*config.Resource
	// Egress holds one entry per egress listener of the Sidecar (one catch-all
	// listener importing */* when it has none, or for the default scope);
	// empty for gateways.
	Egress []*EgressListener
	// OutboundTrafficPolicy is the Sidecar's mode, else the mesh config's,
	// else ALLOW_ANY.
	OutboundTrafficPolicy networking.OutboundTrafficPolicy_Mode

	gateway          bool
	services         []*Service
	byHost           map[string]*Service
	virtualServices  []*config.Resource
	destinationRules map[string][]*config.Resource
	// deps holds the config keys of everything imported; istiod's hostname
	// keys of services are answered from byHost.
	deps map[config.Key]struct{}
	// serviceNamespaces are the namespaces imported services live in;
	// namespaces adds those of imported routes, rules and Gateways.
	serviceNamespaces map[string]struct{}
	namespaces        map[string]struct{}
	// selectors are the workload selectors of imported services, by
	// namespace, for WorkloadEntry dependencies.
	selectors      map[string][]map[string]string
	workloadLabels map[config.Key]map[string]string
}

// EgressListener is one egress listener of a Sidecar and what it imports.
type EgressListener struct {
	// Port is the listener's port; 0 is the catch-all listener, which
	// imports hosts on every port.
	Port uint32
	Bind string
	// Hosts are the egress hosts as written, ns/dnsName.
	Hosts []string
	// Services are the imported services, one per hostname. A listener with
	// a port imports only services that have that port.
	Services []*Service
	// VirtualServices are the imported mesh VirtualServices, oldest first.
	VirtualServices []*config.Resource

	routes []*vsEntry // VirtualServices, indexed
}

// ID identifies the scope within its Index: proxies with the same ID share the
// scope and receive the same generated config. It is derived from how the
// scope was chosen (the Sidecar or Gateways, and the namespace), so it is the
// same across snapshots; combine it with the snapshot's version to key a cache
// that outlives one push.
func (s *SidecarScope) ID() string {
	if s == nil {
		return ""
	}
	return s.id
}

// Services are the imported services across all egress listeners, one per
// hostname, in the order they were imported.
func (s *SidecarScope) Services() []*Service { return s.services }

// Service returns the imported service with the hostname, or nil.
func (s *SidecarScope) Service(host string) *Service { return s.byHost[host] }

// VirtualServices are the imported VirtualServices across all egress
// listeners (for a gateway, those bound to its Gateways), oldest first.
func (s *SidecarScope) VirtualServices() []*config.Resource { return s.virtualServices }

// DestinationRules returns the rules that apply to an imported hostname, oldest
// first: those in the proxy's namespace, else the service's, else the root
// namespace, the most specific host match within the first namespace that has
// one. Istio merges several rules for one host; the caller does that.
func (s *SidecarScope) DestinationRules(host string) []*config.Resource {
	return s.destinationRules[host]
}

// DependsOn says whether a change to the object with this key can change the
// proxies' config. Per kind:
//   - Service, ServiceEntry: imported (an SE also by istiod's hostname key,
//     {ServiceEntry, namespace, hostname});
//   - VirtualService, DestinationRule: imported;
//   - Sidecar: the scope's own Sidecar only; a Sidecar that starts or stops
//     applying is caught by NeedsPush comparing the scopes before and after,
//     as istiod does. Gateways never depend on Sidecars;
//   - Gateway: gateways depend on the Gateways selecting them, sidecars on
//     none (istiod skips Gateway changes for sidecars);
//   - PeerAuthentication: policies in the root namespace, the proxies'
//     namespace and the namespaces of imported services (istiod's rule);
//   - WorkloadEntry: when an imported service in its namespace selects it
//     (or, if the snapshot does not have it, could select it);
//   - Namespace: the proxies' namespace, the root namespace and any namespace
//     something was imported from (istiod pushes everyone);
//   - AuthorizationPolicy: none; sidecars and gateways do not enforce it
//     (node proxies get it through workload discovery, pushed apart);
//   - any other kind: true, as istiod does for kinds it does not scope.
//
// A nil scope depends on everything.
func (s *SidecarScope) DependsOn(key config.Key) bool {
	if s == nil {
		return true
	}
	switch key.Kind {
	case config.KindServiceEntry:
		if svc, ok := s.byHost[key.Name]; ok && svc.Namespace == key.Namespace {
			return true // istiod's hostname key
		}
		_, ok := s.deps[key]
		return ok
	case config.KindService, config.KindVirtualService, config.KindDestinationRule, config.KindGateway:
		_, ok := s.deps[key]
		return ok
	case config.KindSidecar:
		if s.gateway {
			return false
		}
		_, ok := s.deps[key]
		return ok
	case config.KindPeerAuthentication:
		_, ok := s.serviceNamespaces[key.Namespace]
		return ok || key.Namespace == s.Namespace || key.Namespace == s.RootNamespace
	case config.KindWorkloadEntry:
		return s.dependsOnWorkloadEntry(key)
	case config.KindAuthorizationPolicy:
		return false
	case config.KindNamespace:
		_, ok := s.namespaces[key.Name]
		return ok || key.Name == s.Namespace || key.Name == s.RootNamespace
	}
	return true
}

func (s *SidecarScope) dependsOnWorkloadEntry(key config.Key) bool {
	selectors := s.selectors[key.Namespace]
	labels, known := s.workloadLabels[key]
	for _, sel := range selectors {
		if !known || labelsSubset(sel, labels) {
			return true
		}
	}
	return false
}

// DependsOnHost says whether the scope imports the service with this
// hostname, so that endpoint changes of it concern the proxies.
func (s *SidecarScope) DependsOnHost(host string) bool {
	if s == nil {
		return true
	}
	_, ok := s.byHost[host]
	return ok
}

// DependsOnAny says whether the scope depends on any of keys; no keys means
// everything may have changed (a global push), which concerns every scope.
func (s *SidecarScope) DependsOnAny(keys map[config.Key]struct{}) bool {
	if len(keys) == 0 {
		return true
	}
	for k := range keys {
		if s.DependsOn(k) {
			return true
		}
	}
	return false
}

// NeedsPush is the per-proxy filter: whether a change to keys concerns a proxy
// whose scope was prev before the change and is cur after it. Checking both
// catches deletions and a Sidecar starting or stopping to apply, which only
// one of the two snapshots knows. prev may be nil (first push).
func NeedsPush(prev, cur *SidecarScope, keys map[config.Key]struct{}) bool {
	if cur.DependsOnAny(keys) {
		return true
	}
	return prev != nil && prev.DependsOnAny(keys)
}

// Dependencies lists the config keys the scope imported, sorted; for
// debugging and tests. Kind-wide rules of DependsOn, and istiod's hostname
// keys of services, are not listed.
func (s *SidecarScope) Dependencies() []config.Key {
	out := make([]config.Key, 0, len(s.deps))
	for k := range s.deps {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b config.Key) int {
		switch {
		case a.String() < b.String():
			return -1
		case a.String() > b.String():
			return 1
		}
		return 0
	})
	return out
}
