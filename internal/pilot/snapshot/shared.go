package snapshot

import (
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// What every scope's outbound config is made of, shared between scopes.
// A service's outbound clusters depend only on the service and the
// DestinationRules applied to its host, not on the scope that imports it, so
// they are generated and encoded once per snapshot for every scope that
// imports the service under the same rules (istiod's CDS cache keys clusters
// the same way). Every namespace has its own default scope, so before this a
// mesh of N namespaces importing each other generated and encoded N copies
// of every cluster on each push: measured at 100 namespaces, 10,100 clusters
// and 41% of the control plane's CPU per push, instead of 101. Routes are
// still one configuration per scope, but made of shared virtual hosts.

// clusterKey identifies a service's clusters within one snapshot: the
// registry's service (one pointer per snapshot) and the keys of the rules
// merged for its host, in the scope's order, which decides the merge.
type clusterKey struct {
	svc   *model.Service
	rules string
}

// sharedClusters is one service's encoded clusters, made on first use.
type sharedClusters struct {
	once      sync.Once
	err       error
	resources []Resource
}

// fixedClusters are the clusters every sidecar gets (BlackHole,
// Passthrough), encoded once per snapshot.
type fixedClusters struct {
	once      sync.Once
	err       error
	resources []Resource
}

// outboundClusters are a scope's outbound clusters, in generate.OutboundClusters'
// order, each service's shared with every scope importing it under the same
// rules. The slice is the caller's; the Resources are shared.
func (s *Snapshot) outboundClusters(sc *scope.SidecarScope, services []*model.Service) ([]Resource, error) {
	fixed, err := s.fixedOutboundClusters()
	if err != nil {
		return nil, err
	}
	out := append([]Resource(nil), fixed...)
	drs := s.destinationRules(sc)
	for _, svc := range services {
		rules := sc.DestinationRules(svc.Hostname)
		key := clusterKey{svc: svc}
		if len(rules) > 0 {
			names := make([]string, len(rules))
			for i, r := range rules {
				names[i] = r.Key().String()
			}
			key.rules = strings.Join(names, "\x00")
		}
		s.mu.Lock()
		shared, ok := s.clusters[key]
		if !ok {
			shared = &sharedClusters{}
			s.clusters[key] = shared
		}
		s.mu.Unlock()
		shared.once.Do(func() {
			clusters, err := generate.ServiceClusters(svc, drs(svc.Hostname))
			if err == nil {
				shared.resources, err = encodeNamed(clusters)
			}
			shared.err = err
		})
		if shared.err != nil {
			return nil, shared.err
		}
		out = append(out, shared.resources...)
	}
	return out, nil
}

func (s *Snapshot) fixedOutboundClusters() ([]Resource, error) {
	s.fixed.once.Do(func() {
		clusters, err := generate.FixedOutboundClusters()
		if err == nil {
			s.fixed.resources, err = encodeNamed(clusters)
		}
		s.fixed.err = err
	})
	return s.fixed.resources, s.fixed.err
}

// sharedVirtualHost is one service's outbound virtual host, made on first
// use and shared by every scope's route configuration that has it: like a
// cluster, it differs between namespaces only for the services of the
// proxy's own namespace (their short names), so N namespaces' routes are
// made of about N+S hosts rather than N×S.
type sharedVirtualHost struct {
	once sync.Once
	err  error
	host *routev3.VirtualHost
}

// virtualHost is generate.RouteInput.VirtualHosts for this snapshot.
func (s *Snapshot) virtualHost(key generate.VirtualHostKey, build func() (*routev3.VirtualHost, error)) (*routev3.VirtualHost, error) {
	s.mu.Lock()
	shared, ok := s.virtualHosts[key]
	if !ok {
		shared = &sharedVirtualHost{}
		s.virtualHosts[key] = shared
	}
	s.mu.Unlock()
	shared.once.Do(func() { shared.host, shared.err = build() })
	return shared.host, shared.err
}
