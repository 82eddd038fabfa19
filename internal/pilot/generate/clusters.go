package generate

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// leastConn is LEAST_CONN, which Istio deprecated as an alias of LEAST_REQUEST;
// configurations still say it.
const leastConn = networking.LoadBalancerSettings_SimpleLB(1)

// defaultConnectTimeout is the mesh config's connectTimeout default.
const defaultConnectTimeout = 10 * time.Second

// DestinationRules finds the DestinationRule that applies to a host for the
// proxy being generated for (already narrowed to what its scope imports); nil
// when there is none.
type DestinationRules func(host string) *networking.DestinationRule

// OutboundClusters returns one cluster per service port, one per subset of the
// service's DestinationRule, and Istio's BlackHole and Passthrough clusters.
func OutboundClusters(services []*model.Service, rules DestinationRules) ([]*clusterv3.Cluster, error) {
	out, err := FixedOutboundClusters()
	if err != nil {
		return nil, err
	}
	for _, svc := range services {
		var dr *networking.DestinationRule
		if rules != nil {
			dr = rules(svc.Hostname)
		}
		cs, err := ServiceClusters(svc, dr)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// FixedOutboundClusters are the clusters every sidecar gets whatever it
// imports: Istio's BlackHole and Passthrough, in that order.
func FixedOutboundClusters() ([]*clusterv3.Cluster, error) {
	passthrough, err := passthroughCluster(PassthroughCluster)
	if err != nil {
		return nil, err
	}
	return []*clusterv3.Cluster{
		{Name: BlackHoleCluster, ClusterDiscoveryType: discovery(clusterv3.Cluster_STATIC), ConnectTimeout: durationpb.New(defaultConnectTimeout)},
		passthrough,
	}, nil
}

// ServiceClusters are one service's outbound clusters under its merged
// DestinationRule dr (nil for none): one per port, then one per subset of
// it. They depend on nothing else, so the same service under the same rule
// makes the same clusters for every proxy.
func ServiceClusters(svc *model.Service, dr *networking.DestinationRule) ([]*clusterv3.Cluster, error) {
	var out []*clusterv3.Cluster
	for _, port := range svc.Ports {
		policy := portPolicy(dr.GetTrafficPolicy(), port.Number)
		c, err := outboundCluster(svc, port, "", policy)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		for _, subset := range dr.GetSubsets() {
			sp := mergePolicy(policy, portPolicy(subset.GetTrafficPolicy(), port.Number))
			if c, err = outboundCluster(svc, port, subset.GetName(), sp); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func outboundCluster(svc *model.Service, port model.ServicePort, subset string, policy *networking.TrafficPolicy) (*clusterv3.Cluster, error) {
	name := ClusterName(outbound, port.Number, subset, svc.Hostname)
	c := &clusterv3.Cluster{
		Name:           name,
		ConnectTimeout: durationpb.New(defaultConnectTimeout),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
	}
	switch svc.Resolution {
	case model.ResolveNone:
		c.ClusterDiscoveryType = discovery(clusterv3.Cluster_ORIGINAL_DST)
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
	case model.ResolveDNS, model.ResolveDNSRoundRobin:
		kind := clusterv3.Cluster_STRICT_DNS
		if svc.Resolution == model.ResolveDNSRoundRobin {
			kind = clusterv3.Cluster_LOGICAL_DNS
		}
		c.ClusterDiscoveryType = discovery(kind)
		c.LoadAssignment = dnsLoadAssignment(name, svc.Hostname, port)
	default:
		c.ClusterDiscoveryType = discovery(clusterv3.Cluster_EDS)
		c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: name}
	}
	applyTrafficPolicy(c, policy)
	if err := setUpstreamProtocol(c, protocolFor(port.Protocol)); err != nil {
		return nil, err
	}
	if !svc.MeshExternal {
		matches, err := autoMTLS(port.Number, subset, svc.Hostname, policy.GetTls())
		if err != nil {
			return nil, err
		}
		c.TransportSocketMatches = matches
	}
	return c, nil
}

// dnsLoadAssignment points a DNS cluster at the hostname itself.
func dnsLoadAssignment(cluster, host string, port model.ServicePort) *endpointv3.ClusterLoadAssignment {
	target := port.Number
	if port.TargetPort != 0 {
		target = port.TargetPort
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(host, target, nil)},
		}},
	}
}

// passthroughCluster sends to each connection's original destination, in
// the client's HTTP version.
func passthroughCluster(name string) (*clusterv3.Cluster, error) {
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: discovery(clusterv3.Cluster_ORIGINAL_DST),
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout:       durationpb.New(defaultConnectTimeout),
	}
	return c, setUpstreamProtocol(c, upstreamDownstream)
}

func discovery(t clusterv3.Cluster_DiscoveryType) *clusterv3.Cluster_Type {
	return &clusterv3.Cluster_Type{Type: t}
}

// adsConfigSource says "over the same ADS stream", for EDS, RDS and SDS.
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// portPolicy returns the traffic policy for a port: the port-level settings that
// match it replace the top-level ones they set (as Istio merges them).
func portPolicy(p *networking.TrafficPolicy, port uint32) *networking.TrafficPolicy {
	if p == nil {
		return nil
	}
	for _, pl := range p.GetPortLevelSettings() {
		if pl.GetPort().GetNumber() != port {
			continue
		}
		merged := &networking.TrafficPolicy{
			LoadBalancer: p.GetLoadBalancer(), ConnectionPool: p.GetConnectionPool(),
			OutlierDetection: p.GetOutlierDetection(), Tls: p.GetTls(),
		}
		if pl.GetLoadBalancer() != nil {
			merged.LoadBalancer = pl.GetLoadBalancer()
		}
		if pl.GetConnectionPool() != nil {
			merged.ConnectionPool = pl.GetConnectionPool()
		}
		if pl.GetOutlierDetection() != nil {
			merged.OutlierDetection = pl.GetOutlierDetection()
		}
		if pl.GetTls() != nil {
			merged.Tls = pl.GetTls()
		}
		return merged
	}
	return p
}

// mergePolicy lays a subset's policy over the service's: each part the subset
// sets replaces the service's.
func mergePolicy(base, over *networking.TrafficPolicy) *networking.TrafficPolicy {
	switch {
	case over == nil:
		return base
	case base == nil:
		return over
	}
	m := &networking.TrafficPolicy{
		LoadBalancer: base.GetLoadBalancer(), ConnectionPool: base.GetConnectionPool(),
		OutlierDetection: base.GetOutlierDetection(), Tls: base.GetTls(),
	}
	if over.GetLoadBalancer() != nil {
		m.LoadBalancer = over.GetLoadBalancer()
	}
	if over.GetConnectionPool() != nil {
		m.ConnectionPool = over.GetConnectionPool()
	}
	if over.GetOutlierDetection() != nil {
		m.OutlierDetection = over.GetOutlierDetection()
	}
	if over.GetTls() != nil {
		m.Tls = over.GetTls()
	}
	return m
}

// applyTrafficPolicy sets load balancing, connection pool limits (circuit
// breakers) and outlier detection from a DestinationRule's traffic policy.
func applyTrafficPolicy(c *clusterv3.Cluster, p *networking.TrafficPolicy) {
	if p == nil {
		return
	}
	if c.LbPolicy != clusterv3.Cluster_CLUSTER_PROVIDED {
		switch p.GetLoadBalancer().GetSimple() {
		case networking.LoadBalancerSettings_LEAST_REQUEST, leastConn:
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		case networking.LoadBalancerSettings_RANDOM:
			c.LbPolicy = clusterv3.Cluster_RANDOM
		case networking.LoadBalancerSettings_PASSTHROUGH:
			c.ClusterDiscoveryType = discovery(clusterv3.Cluster_ORIGINAL_DST)
			c.LbPolicy, c.EdsClusterConfig, c.LoadAssignment = clusterv3.Cluster_CLUSTER_PROVIDED, nil, nil
		}
	}
	if pool := p.GetConnectionPool(); pool != nil {
		th := &clusterv3.CircuitBreakers_Thresholds{}
		if v := pool.GetTcp().GetMaxConnections(); v > 0 {
			th.MaxConnections = wrapperspb.UInt32(uint32(v))
		}
		if v := pool.GetHttp().GetHttp1MaxPendingRequests(); v > 0 {
			th.MaxPendingRequests = wrapperspb.UInt32(uint32(v))
		}
		if v := pool.GetHttp().GetHttp2MaxRequests(); v > 0 {
			th.MaxRequests = wrapperspb.UInt32(uint32(v))
		}
		if v := pool.GetHttp().GetMaxRetries(); v > 0 {
			th.MaxRetries = wrapperspb.UInt32(uint32(v))
		}
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
		if d := pool.GetTcp().GetConnectTimeout(); d != nil {
			c.ConnectTimeout = durationpb.New(d.AsDuration())
		}
	}
	if od := p.GetOutlierDetection(); od != nil {
		o := &clusterv3.OutlierDetection{
			Interval:         od.GetInterval(),
			BaseEjectionTime: od.GetBaseEjectionTime(),
		}
		if v := od.GetConsecutive_5XxErrors(); v != nil {
			o.Consecutive_5Xx = wrapperspb.UInt32(v.GetValue())
		}
		if v := od.GetMaxEjectionPercent(); v > 0 {
			o.MaxEjectionPercent = wrapperspb.UInt32(uint32(v))
		}
		c.OutlierDetection = o
	}
}
