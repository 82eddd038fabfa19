package generate

import (
	"fmt"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Envoy's filter names.
const (
	hcmFilter          = "envoy.filters.network.http_connection_manager"
	tcpProxyFilter     = "envoy.filters.network.tcp_proxy"
	routerFilter       = "envoy.filters.http.router"
	tlsInspectorFilter = "envoy.filters.listener.tls_inspector"
)

// MTLSMode is the inbound side's PeerAuthentication mode.
type MTLSMode int

// PeerAuthentication modes. Istio's default, with no PeerAuthentication, is
// PERMISSIVE.
const (
	MTLSPermissive MTLSMode = iota
	MTLSStrict
	MTLSDisable
)

// isHTTP says whether a protocol is routed by the HTTP connection manager.
func isHTTP(p model.Protocol) bool {
	switch p {
	case "HTTP", "HTTP2", "GRPC", "GRPC-WEB":
		return true
	}
	return false
}

// OutboundListeners returns Istio's capture listener virtualOutbound (15001),
// which hands each connection to the listener for its original destination
// port, or to the passthrough (or blackhole) cluster; a listener 0.0.0.0_PORT
// per HTTP port (routes named PORT); and a TCP proxy listener per TCP service
// port, on the service's address when it has one.
func OutboundListeners(services []*model.Service, registryOnly bool) ([]*listenerv3.Listener, error) {
	keys := OutboundListenerKeys(services, registryOnly)
	out := make([]*listenerv3.Listener, 0, len(keys))
	for _, k := range keys {
		l, err := k.Listener()
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// OutboundListenerKey is what one of OutboundListeners' listeners is made
// from, and all it is made from: scopes that import the same services make
// many of the same listeners, which a caller can build (and encode) once per
// key, as it does clusters.
type OutboundListenerKey struct {
	kind outboundListenerKind
	// Port is the listener's port (virtualOutbound's for the capture one).
	Port uint32
	// registryOnly picks the capture listener's fallback cluster.
	registryOnly bool
	// ip and hostname are a TCP listener's address and service.
	ip, hostname string
}

type outboundListenerKind uint8

const (
	captureListener outboundListenerKind = iota
	httpListener
	tcpListener
)

// OutboundListenerKeys lists OutboundListeners' listeners, in its order.
func OutboundListenerKeys(services []*model.Service, registryOnly bool) []OutboundListenerKey {
	out := []OutboundListenerKey{{kind: captureListener, Port: VirtualOutboundPort, registryOnly: registryOnly}}
	httpPorts := map[uint32]bool{}
	for _, svc := range services {
		for _, p := range svc.Ports {
			if isHTTP(p.Protocol) && !httpPorts[p.Number] {
				httpPorts[p.Number] = true
				out = append(out, OutboundListenerKey{kind: httpListener, Port: p.Number})
			}
		}
	}
	for _, svc := range services {
		for _, p := range svc.Ports {
			if isHTTP(p.Protocol) {
				continue
			}
			ip := "0.0.0.0"
			if len(svc.Addresses) > 0 {
				ip = svc.Addresses[0]
			} else if httpPorts[p.Number] {
				continue // an HTTP listener owns 0.0.0.0 on this port
			}
			out = append(out, OutboundListenerKey{kind: tcpListener, Port: p.Number, ip: ip, hostname: svc.Hostname})
		}
	}
	return out
}

// Listener builds the listener k stands for.
func (k OutboundListenerKey) Listener() (*listenerv3.Listener, error) {
	switch k.kind {
	case httpListener:
		return outboundHTTPListener(k.Port)
	case tcpListener:
		cluster := ClusterName(outbound, k.Port, "", k.hostname)
		chain, err := tcpProxyChain(cluster, cluster)
		if err != nil {
			return nil, err
		}
		return &listenerv3.Listener{
			Name:             k.ip + "_" + strconv.FormatUint(uint64(k.Port), 10),
			Address:          socketAddress(k.ip, k.Port),
			BindToPort:       wrapperspb.Bool(false),
			FilterChains:     []*listenerv3.FilterChain{chain},
			TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		}, nil
	}
	fallback := PassthroughCluster
	if k.registryOnly {
		fallback = BlackHoleCluster
	}
	catchAll, err := tcpProxyChain("virtualOutbound-catchall-tcp", fallback)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:             VirtualOutboundListener,
		Address:          socketAddress("0.0.0.0", VirtualOutboundPort),
		UseOriginalDst:   wrapperspb.Bool(true),
		FilterChains:     []*listenerv3.FilterChain{catchAll},
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
	}, nil
}

func outboundHTTPListener(port uint32) (*listenerv3.Listener, error) {
	name := strconv.FormatUint(uint64(port), 10)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound_0.0.0.0_" + name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: name, ConfigSource: adsConfigSource(),
		}},
	}
	chain, err := hcmChain(hcm)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:             "0.0.0.0_" + name,
		Address:          socketAddress("0.0.0.0", port),
		BindToPort:       wrapperspb.Bool(false),
		FilterChains:     []*listenerv3.FilterChain{chain},
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
	}, nil
}

// InboundPort is a port the proxy's own workload serves.
type InboundPort struct {
	Port     uint32 // the workload's port (a service's target port)
	Protocol model.Protocol
	MTLS     MTLSMode // the PeerAuthentication mode for this port (zero: PERMISSIVE)
}

// InboundListener returns virtualInbound (15006): one filter chain per served
// port (two under PERMISSIVE: mTLS and plain text, told apart by TLS
// detection), and a passthrough chain for ports no service declares.
func InboundListener(ports []InboundPort) (*listenerv3.Listener, error) {
	l := &listenerv3.Listener{
		Name:             VirtualInboundListener,
		Address:          socketAddress("0.0.0.0", VirtualInboundPort),
		UseOriginalDst:   wrapperspb.Bool(true),
		TrafficDirection: corev3.TrafficDirection_INBOUND,
	}
	// Every chain but DISABLE's matches on the TLS transport, which takes TLS
	// detection (Envoy would inject the inspector itself, with a warning).
	if slices.ContainsFunc(ports, func(p InboundPort) bool { return p.MTLS != MTLSDisable }) {
		inspector, err := anypb.New(&tlsinspectorv3.TlsInspector{})
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name: tlsInspectorFilter, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}}
	}
	for _, p := range ports {
		chains, err := inboundChains(p)
		if err != nil {
			return nil, err
		}
		l.FilterChains = append(l.FilterChains, chains...)
	}
	passthrough, err := tcpProxyChain("virtualInbound-catchall", InboundPassthroughCluster)
	if err != nil {
		return nil, err
	}
	l.FilterChains = append(l.FilterChains, passthrough)
	return l, nil
}

func inboundChains(p InboundPort) ([]*listenerv3.FilterChain, error) {
	cluster := ClusterName(inbound, p.Port, "", "")
	build := func() (*listenerv3.FilterChain, error) {
		if !isHTTP(p.Protocol) {
			return tcpProxyChain(cluster, cluster)
		}
		return hcmChain(inboundHCM(p.Port, cluster))
	}
	var variants []string // transport protocols, "" for any
	switch p.MTLS {
	case MTLSPermissive:
		variants = []string{"tls", "raw_buffer"}
	case MTLSStrict:
		variants = []string{"tls"}
	default:
		variants = []string{""}
	}
	var out []*listenerv3.FilterChain
	for _, tp := range variants {
		chain, err := build()
		if err != nil {
			return nil, err
		}
		chain.Name = cluster
		chain.FilterChainMatch = &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(p.Port), TransportProtocol: tp}
		if tp == "tls" {
			if chain.TransportSocket, err = DownstreamMTLS(); err != nil {
				return nil, err
			}
		}
		out = append(out, chain)
	}
	return out, nil
}

// inboundHCM routes everything on an inbound HTTP port to the local workload.
func inboundHCM(port uint32, cluster string) *hcmv3.HttpConnectionManager {
	name := "inbound|http|" + strconv.FormatUint(uint64(port), 10)
	return &hcmv3.HttpConnectionManager{
		StatPrefix: "inbound_0.0.0.0_" + strconv.FormatUint(uint64(port), 10),
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: name,
			VirtualHosts: []*routev3.VirtualHost{{
				Name: name, Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Name:  "default",
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
						Timeout:          durationpb.New(0),
					}},
				}},
			}},
		}},
	}
}

// InboundClusters are the local workload's ports: inbound|PORT|| to 127.0.0.1
// (HTTP/2 for HTTP/2 and gRPC ports), plus the passthrough for undeclared
// ports.
func InboundClusters(ports []InboundPort) ([]*clusterv3.Cluster, error) {
	passthrough, err := passthroughCluster(InboundPassthroughCluster)
	if err != nil {
		return nil, err
	}
	out := []*clusterv3.Cluster{passthrough}
	for _, p := range ports {
		name := ClusterName(inbound, p.Port, "", "")
		c := &clusterv3.Cluster{
			Name:                 name,
			ClusterDiscoveryType: discovery(clusterv3.Cluster_STATIC),
			ConnectTimeout:       durationpb.New(defaultConnectTimeout),
			LoadAssignment:       dnsLoadAssignment(name, "127.0.0.1", model.ServicePort{Number: p.Port}),
		}
		if err := setUpstreamProtocol(c, protocolFor(p.Protocol)); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// hcmChain wraps an HTTP connection manager, with the fault and router filters,
// in a filter chain.
func hcmChain(hcm *hcmv3.HttpConnectionManager) (*listenerv3.FilterChain, error) {
	fault, err := anypb.New(&faultv3.HTTPFault{})
	if err != nil {
		return nil, err
	}
	router, err := routerHTTPFilter()
	if err != nil {
		return nil, err
	}
	hcm.HttpFilters = []*hcmv3.HttpFilter{
		{Name: FaultFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: fault}},
		router,
	}
	return networkFilterChain(hcmFilter, hcm)
}

// routerHTTPFilter is the router, an HTTP connection manager's last filter.
func routerHTTPFilter() (*hcmv3.HttpFilter, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpFilter{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}, nil
}

func tcpProxyChain(name, cluster string) (*listenerv3.FilterChain, error) {
	chain, err := networkFilterChain(tcpProxyFilter, &tcpproxyv3.TcpProxy{
		StatPrefix:       cluster,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster},
	})
	if err != nil {
		return nil, err
	}
	chain.Name = name
	return chain, nil
}

func networkFilterChain(name string, cfg proto.Message) (*listenerv3.FilterChain, error) {
	a, err := anypb.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return &listenerv3.FilterChain{Filters: []*listenerv3.Filter{{
		Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a},
	}}}, nil
}
