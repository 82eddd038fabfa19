// Package snapshot is the push context: the whole mesh as one push sees it,
// built once per push from the store, the registry and the mesh config, and the
// generation of each proxy's Envoy resources from it.
//
// What proxies share is generated once per snapshot: the outbound clusters,
// listeners and routes of a Sidecar scope, the endpoints of a cluster, the
// secret of an identity. Each is encoded once and the same bytes are handed to
// every proxy that needs them, which is where most of a control plane's CPU and
// memory would otherwise go with thousands of proxies.
package snapshot

import (
	"fmt"
	"sync"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/registry"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// Envoy v3 type URLs.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// Resource is one generated, encoded resource.
type Resource struct {
	Name string
	Body *anypb.Any
}

// Snapshot is one push's view of the mesh. It is immutable except for its
// generation caches, and safe for concurrent use by every proxy's push.
type Snapshot struct {
	Version      string
	Built        time.Time
	Mesh         *meshconfig.MeshConfig
	DomainSuffix string
	Registry     *registry.Snapshot
	Scopes       *scope.Index
	CA           *ca.CA // nil: no SDS (mTLS needs it)

	peerAuthentications   []*config.Resource
	authorizationPolicies []*config.Resource
	waypoints             map[waypointKey]*waypoint // the waypoint Gateways

	mu           sync.Mutex
	outbound     map[string]*outboundConfig // by scope ID
	endpoints    map[endpointsKey]Resource
	clusters     map[clusterKey]*sharedClusters
	inbound      map[string]*sharedClusters // by inboundKey
	listeners    map[generate.OutboundListenerKey]*sharedListener
	virtualHosts map[generate.VirtualHostKey]*sharedVirtualHost
	// virtualHostOf finds a shared virtual host's entry from the host, to
	// reuse its encoding.
	virtualHostOf map[*routev3.VirtualHost]*sharedVirtualHost
	fixed         sharedClusters

	ambientCfg ambientConfig // what node proxies get, made on first use
}

// Input is what a snapshot is built from.
type Input struct {
	Version      string
	Resources    []*config.Resource // every object, discoverySelectors applied
	Registry     *registry.Snapshot
	Mesh         *meshconfig.MeshConfig
	DomainSuffix string
	CA           *ca.CA
	// Scopes, when set, is the Sidecar scope index of an earlier snapshot
	// built from the same Resources, Mesh and DomainSuffix (the index
	// depends on nothing else): reusing it keeps the scopes it has already
	// built. nil builds a new one.
	Scopes *scope.Index
}

// Build makes the snapshot for one push.
func Build(in Input) *Snapshot {
	if in.DomainSuffix == "" {
		in.DomainSuffix = scope.DefaultDomainSuffix
	}
	s := &Snapshot{
		Version:       in.Version,
		Built:         time.Now(),
		Mesh:          in.Mesh,
		DomainSuffix:  in.DomainSuffix,
		Registry:      in.Registry,
		Scopes:        in.Scopes,
		CA:            in.CA,
		outbound:      map[string]*outboundConfig{},
		endpoints:     map[endpointsKey]Resource{},
		clusters:      map[clusterKey]*sharedClusters{},
		inbound:       map[string]*sharedClusters{},
		listeners:     map[generate.OutboundListenerKey]*sharedListener{},
		virtualHosts:  map[generate.VirtualHostKey]*sharedVirtualHost{},
		virtualHostOf: map[*routev3.VirtualHost]*sharedVirtualHost{},
	}
	if s.Scopes == nil {
		s.Scopes = scope.NewIndex(scope.Input{Resources: in.Resources, Mesh: in.Mesh, DomainSuffix: in.DomainSuffix})
	}
	var gateways []*config.Resource
	for _, r := range in.Resources {
		switch r.Kind {
		case config.KindPeerAuthentication:
			s.peerAuthentications = append(s.peerAuthentications, r)
		case config.KindAuthorizationPolicy:
			s.authorizationPolicies = append(s.authorizationPolicies, r)
		case config.KindKubernetesGateway:
			gateways = append(gateways, r)
		}
	}
	s.waypoints = waypointsOf(gateways)
	return s
}

// encode wraps a message for the wire, once. The encoding is deterministic
// (map entries in key order), so the same content always makes the same
// bytes: delta xDS versions are checksums of them, and a node proxy's push is
// skipped when its resources' bytes did not change.
func encode(name string, m proto.Message) (Resource, error) {
	a := &anypb.Any{}
	err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true})
	if err != nil {
		return Resource{}, fmt.Errorf("encoding %s: %w", name, err)
	}
	return Resource{Name: name, Body: a}, nil
}
