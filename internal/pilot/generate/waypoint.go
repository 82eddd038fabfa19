package generate

import (
	"net"
	"net/netip"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// A waypoint's listeners and clusters, istiod's names: HBONE is terminated
// on connect_terminate, each CONNECT stream goes to the internal listener
// main_internal for the L7 work of the service it was addressed to, and
// leaves through connect_originate, wrapped in HBONE again to the endpoint.
const (
	ConnectTerminate = "connect_terminate"
	MainInternal     = "main_internal"
	ConnectOriginate = "connect_originate"
)

// tunnelMetadata is the endpoint metadata (filter_metadata["tunnel"]) that
// carries an endpoint's address through the internal upstream to
// connect_originate, where it becomes the CONNECT authority.
const (
	tunnelMetadata    = "tunnel"
	tunnelDestination = "destination"
)

// HBONE's HTTP/2 windows, ztunnel's: 4 MiB per stream, 16 MiB per connection.
const (
	hboneStreamWindow     = 4 << 20
	hboneConnectionWindow = 16 << 20
)

// WaypointInput is what a waypoint's config is made of: the services bound
// to it (each with at least one VIP, resolved statically) and the routing
// and traffic policy that apply to them.
type WaypointInput struct {
	Services        []*model.Service
	VirtualServices []BoundVirtualService
	Rules           DestinationRules
	Namespace       string // the waypoint's, which short names resolve in
	DomainSuffix    string
}

// WaypointConfig is a waypoint's Envoy configuration but endpoints and
// secrets; its routes are inline in its listeners.
type WaypointConfig struct {
	Listeners []*listenerv3.Listener
	Clusters  []*clusterv3.Cluster
}

// BuildWaypoint generates a waypoint's listeners and clusters.
func BuildWaypoint(in WaypointInput) (*WaypointConfig, error) {
	terminate, err := connectTerminateListener()
	if err != nil {
		return nil, err
	}
	internal, err := mainInternalListener(in)
	if err != nil {
		return nil, err
	}
	originate, err := connectOriginateListener()
	if err != nil {
		return nil, err
	}
	clusters, err := waypointClusters(in)
	if err != nil {
		return nil, err
	}
	listeners := []*listenerv3.Listener{terminate, internal, originate}
	if len(internal.FilterChains) == 0 {
		// No service bound yet (or a Gateway not yet known): Envoy rejects a
		// listener without filter chains, and so does meshperf-proxy, which
		// would NACK the whole response, connect_terminate included. Without
		// main_internal a CONNECT is refused as for a service the waypoint
		// does not serve.
		listeners = []*listenerv3.Listener{terminate, originate}
	}
	return &WaypointConfig{Listeners: listeners, Clusters: clusters}, nil
}

// connectTerminateListener accepts HBONE: mutual TLS 1.3 with ALPN h2, and
// every CONNECT stream sent to main_internal.
func connectTerminateListener() (*listenerv3.Listener, error) {
	tls, err := transportSocket(&tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext:         hboneTLSContext(),
	})
	if err != nil {
		return nil, err
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:           ConnectTerminate,
		CodecType:            hcmv3.HttpConnectionManager_HTTP2,
		Http2ProtocolOptions: hboneHTTP2Options(),
		UpgradeConfigs:       []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}},
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: ConnectTerminate,
			VirtualHosts: []*routev3.VirtualHost{{
				Name: ConnectTerminate, Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: MainInternal},
						UpgradeConfigs: []*routev3.RouteAction_UpgradeConfig{{
							UpgradeType: "CONNECT", ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{},
						}},
					}},
				}},
			}},
		}},
	}
	router, err := routerHTTPFilter()
	if err != nil {
		return nil, err
	}
	hcm.HttpFilters = []*hcmv3.HttpFilter{router}
	chain, err := networkFilterChain(hcmFilter, hcm)
	if err != nil {
		return nil, err
	}
	chain.TransportSocket = tls
	return &listenerv3.Listener{
		Name:         ConnectTerminate,
		Address:      socketAddress("0.0.0.0", HBONEPort),
		FilterChains: []*listenerv3.FilterChain{chain},
	}, nil
}

// mainInternalListener does the L7 work: one filter chain per service port
// the waypoint serves, picked by the CONNECT authority (the service's VIP and
// port), routed as a sidecar routes that service.
func mainInternalListener(in WaypointInput) (*listenerv3.Listener, error) {
	l := &listenerv3.Listener{
		Name:              MainInternal,
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		UseOriginalDst:    wrapperspb.Bool(true),
		TrafficDirection:  corev3.TrafficDirection_INBOUND,
	}
	for _, svc := range in.Services {
		for _, port := range svc.Ports {
			chain, err := waypointServiceChain(in, svc, port)
			if err != nil {
				return nil, err
			}
			l.FilterChains = append(l.FilterChains, chain)
		}
	}
	return l, nil
}

func waypointServiceChain(in WaypointInput, svc *model.Service, port model.ServicePort) (*listenerv3.FilterChain, error) {
	cluster := ClusterName(outbound, port.Number, "", svc.Hostname)
	kind := "tcp"
	if isHTTP(port.Protocol) {
		kind = "http"
	}
	name := "inbound-vip|" + strconv.FormatUint(uint64(port.Number), 10) + "|" + kind + "|" + svc.Hostname
	var chain *listenerv3.FilterChain
	var err error
	if kind == "tcp" {
		chain, err = tcpProxyChain(name, cluster)
	} else {
		chain, err = waypointHTTPChain(in, svc, port.Number, name)
	}
	if err != nil {
		return nil, err
	}
	chain.Name = name
	chain.FilterChainMatch = &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port.Number)}
	for _, a := range svc.Addresses {
		if addr, err := netip.ParseAddr(a); err == nil {
			chain.FilterChainMatch.PrefixRanges = append(chain.FilterChainMatch.PrefixRanges, &corev3.CidrRange{
				AddressPrefix: addr.String(), PrefixLen: wrapperspb.UInt32(uint32(addr.BitLen())),
			})
		}
	}
	return chain, nil
}

// waypointHTTPChain routes one service port: the service's virtual host as
// the sidecar's outbound routes build it (its VirtualService's matches,
// weights, subsets, timeouts, retries, faults), for any authority, since the
// chain already chose the service.
func waypointHTTPChain(in WaypointInput, svc *model.Service, port uint32, name string) (*listenerv3.FilterChain, error) {
	rc, err := OutboundRouteConfig(RouteInput{
		Port: port, Services: []*model.Service{svc}, VirtualServices: in.VirtualServices,
		ProxyNamespace: in.Namespace, DomainSuffix: in.DomainSuffix,
	})
	if err != nil {
		return nil, err
	}
	vh := rc.VirtualHosts[0] // the service's; the catch-all after it has no use here
	vh.Name = name
	vh.Domains = []string{"*"}
	return hcmChain(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: name, VirtualHosts: []*routev3.VirtualHost{vh}, ValidateClusters: wrapperspb.Bool(false),
		}},
	})
}

// connectOriginateListener wraps each connection in HBONE to the endpoint
// the internal upstream brought it for, named as the CONNECT authority.
func connectOriginateListener() (*listenerv3.Listener, error) {
	chain, err := networkFilterChain(tcpProxyFilter, &tcpproxyv3.TcpProxy{
		StatPrefix:       ConnectOriginate,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: ConnectOriginate},
		TunnelingConfig:  &tcpproxyv3.TcpProxy_TunnelingConfig{Hostname: "%DOWNSTREAM_LOCAL_ADDRESS%"},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:              ConnectOriginate,
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		FilterChains:      []*listenerv3.FilterChain{chain},
	}, nil
}

// waypointClusters are main_internal, connect_originate, and the bound
// services' outbound clusters as a sidecar's (DestinationRule subsets, load
// balancing, circuit breakers, outlier detection), whose endpoints are
// reached through connect_originate rather than dialled.
func waypointClusters(in WaypointInput) ([]*clusterv3.Cluster, error) {
	originate, err := connectOriginateCluster()
	if err != nil {
		return nil, err
	}
	out := []*clusterv3.Cluster{{
		Name:                 MainInternal,
		ClusterDiscoveryType: discovery(clusterv3.Cluster_STATIC),
		ConnectTimeout:       durationpb.New(defaultConnectTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: MainInternal,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
				internalLbEndpoint(MainInternal, "", nil),
			}}},
		},
	}, originate}
	services, err := OutboundClusters(in.Services, in.Rules)
	if err != nil {
		return nil, err
	}
	internal, err := internalUpstream()
	if err != nil {
		return nil, err
	}
	for _, c := range services {
		if c.Name == BlackHoleCluster || c.Name == PassthroughCluster {
			continue // a waypoint only reaches the services bound to it
		}
		c.TransportSocketMatches = nil // no mTLS of its own: the tunnel's
		c.TransportSocket = internal
		out = append(out, c)
	}
	return out, nil
}

// connectOriginateCluster opens HBONE connections: to each connection's
// original destination (the endpoint's address) on 15008, over mutual TLS
// 1.3 with the waypoint's certificate, HTTP/2 with HBONE's windows. The peer
// is checked against the mesh root only: a waypoint reaches many identities.
func connectOriginateCluster() (*clusterv3.Cluster, error) {
	tls, err := transportSocket(&tlsv3.UpstreamTlsContext{CommonTlsContext: hboneTLSContext()})
	if err != nil {
		return nil, err
	}
	c := &clusterv3.Cluster{
		Name:                 ConnectOriginate,
		ClusterDiscoveryType: discovery(clusterv3.Cluster_ORIGINAL_DST),
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		LbConfig: &clusterv3.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: &clusterv3.Cluster_OriginalDstLbConfig{
			UpstreamPortOverride: wrapperspb.UInt32(HBONEPort),
		}},
		ConnectTimeout:  durationpb.New(defaultConnectTimeout),
		TransportSocket: tls,
	}
	return c, setUpstreamProtocol(c, upstreamHBONE)
}

// hboneTLSContext is both ends of HBONE's mutual TLS: the workload
// certificate and the mesh root from SDS, TLS 1.3 only, ALPN h2.
func hboneTLSContext() *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		AlpnProtocols: []string{"h2"},
		TlsParams:     &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3},
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{
			{Name: WorkloadSecret, SdsConfig: adsConfigSource()},
		},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: RootSecret, SdsConfig: adsConfigSource()},
			},
		},
	}
}

func hboneHTTP2Options() *corev3.Http2ProtocolOptions {
	return &corev3.Http2ProtocolOptions{
		AllowConnect:                true,
		InitialStreamWindowSize:     wrapperspb.UInt32(hboneStreamWindow),
		InitialConnectionWindowSize: wrapperspb.UInt32(hboneConnectionWindow),
	}
}

// internalUpstream hands a cluster's connections to an internal listener,
// passing the endpoint's tunnel metadata along, as istiod configures it.
func internalUpstream() (*corev3.TransportSocket, error) {
	raw, err := anypb.New(&rawbufferv3.RawBuffer{})
	if err != nil {
		return nil, err
	}
	iu, err := anypb.New(&internalupstreamv3.InternalUpstreamTransport{
		PassthroughMetadata: []*internalupstreamv3.InternalUpstreamTransport_MetadataValueSource{{
			Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Host_{Host: &metadatav3.MetadataKind_Host{}}},
			Name: tunnelMetadata,
		}},
		TransportSocket: &corev3.TransportSocket{
			Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name: "envoy.transport_sockets.internal_upstream", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: iu},
	}, nil
}

// WaypointLoadAssignment is the EDS resource of a waypoint's outbound
// cluster: each endpoint (narrowed to the subset's labels) as an internal
// address of connect_originate, with the workload's IP:PORT as endpoint id
// and tunnel destination.
func WaypointLoadAssignment(cluster string, endpoints []*model.Endpoint, subsetLabels map[string]string) *endpointv3.ClusterLoadAssignment {
	return loadAssignment(cluster, endpoints, subsetLabels, func(ep *model.Endpoint) *endpointv3.LbEndpoint {
		dest := net.JoinHostPort(ep.Address, strconv.FormatUint(uint64(ep.Port), 10))
		return internalLbEndpoint(ConnectOriginate, dest, &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			tunnelMetadata: {Fields: map[string]*structpb.Value{tunnelDestination: structpb.NewStringValue(dest)}},
		}})
	})
}

func internalLbEndpoint(listener, endpointID string, meta *corev3.Metadata) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
				AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
				EndpointId:           endpointID,
			}}},
		}},
		Metadata: meta,
	}
}
