package generate

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/testutil"
)

// golden compares generated resources, as a JSON array, with
// testdata/golden/NAME.json (go test -update rewrites it).
func golden(t *testing.T, name string, msgs ...proto.Message) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i, m := range msgs {
		buf.Write(testutil.ProtoJSON(t, m))
		if i < len(msgs)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	testutil.Golden(t, filepath.Join("testdata", "golden", name+".json"), buf.Bytes())
}

// bookinfo is a small representative mesh: an HTTP service with subsets and a
// weighted, fault-injected, retried route; a TCP database; a DNS ServiceEntry;
// a headless service.
func bookinfo() ([]*model.Service, DestinationRules, []BoundVirtualService) {
	reviews := &model.Service{
		Key:      config.Key{Kind: config.KindService, Namespace: "default", Name: "reviews"},
		Hostname: "reviews.default.svc.cluster.local", Namespace: "default",
		Ports:     []model.ServicePort{{Name: "http", Number: 9080, Protocol: "HTTP"}},
		Addresses: []string{"10.96.0.20"},
	}
	ratings := &model.Service{
		Key:      config.Key{Kind: config.KindService, Namespace: "default", Name: "ratings"},
		Hostname: "ratings.default.svc.cluster.local", Namespace: "default",
		Ports: []model.ServicePort{{Name: "http", Number: 9080, Protocol: "HTTP", TargetPort: 8080}},
	}
	db := &model.Service{
		Key:      config.Key{Kind: config.KindService, Namespace: "data", Name: "mysql"},
		Hostname: "mysql.data.svc.cluster.local", Namespace: "data",
		Ports: []model.ServicePort{{Name: "tcp-mysql", Number: 3306, Protocol: "TCP"}},
	}
	ext := &model.Service{
		Key:      config.Key{Kind: config.KindServiceEntry, Namespace: "default", Name: "ext"},
		Hostname: "api.example.com", Namespace: "default", MeshExternal: true, Resolution: model.ResolveDNS,
		Ports: []model.ServicePort{{Name: "https", Number: 443, Protocol: "TLS"}},
	}
	headless := &model.Service{
		Key:      config.Key{Kind: config.KindService, Namespace: "data", Name: "cassandra"},
		Hostname: "cassandra.data.svc.cluster.local", Namespace: "data", Resolution: model.ResolveNone,
		Ports: []model.ServicePort{{Name: "tcp", Number: 9042, Protocol: "TCP"}},
	}
	reviewsDR := &networking.DestinationRule{
		Host: "reviews",
		TrafficPolicy: &networking.TrafficPolicy{
			LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_LEAST_REQUEST}},
			ConnectionPool: &networking.ConnectionPoolSettings{
				Tcp:  &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 100, ConnectTimeout: durationpb.New(2e9)},
				Http: &networking.ConnectionPoolSettings_HTTPSettings{Http1MaxPendingRequests: 10, Http2MaxRequests: 1000},
			},
			Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL},
		},
		Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"}, TrafficPolicy: &networking.TrafficPolicy{
				LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}},
			}},
		},
	}
	rules := func(host string) *networking.DestinationRule {
		if host == reviews.Hostname {
			return reviewsDR
		}
		return nil
	}
	vs := BoundVirtualService{Namespace: "default", Spec: &networking.VirtualService{
		Hosts: []string{"reviews"},
		Http: []*networking.HTTPRoute{
			{
				Name: "jason",
				Match: []*networking.HTTPMatchRequest{{
					Headers: map[string]*networking.StringMatch{"end-user": {MatchType: &networking.StringMatch_Exact{Exact: "jason"}}},
					Uri:     &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/reviews"}},
				}},
				Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews", Subset: "v2"}}},
				Fault: &networking.HTTPFaultInjection{
					Delay: &networking.HTTPFaultInjection_Delay{
						HttpDelayType: &networking.HTTPFaultInjection_Delay_FixedDelay{FixedDelay: durationpb.New(7e9)},
						Percentage:    &networking.Percent{Value: 0.1},
					},
				},
			},
			{
				Name:    "split",
				Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews", Subset: "v1"}, Weight: 80}, {Destination: &networking.Destination{Host: "reviews", Subset: "v2"}, Weight: 20}},
				Timeout: durationpb.New(5e8),
				Retries: &networking.HTTPRetry{Attempts: 3, PerTryTimeout: durationpb.New(2e8), RetryOn: "5xx,reset"},
				Rewrite: &networking.HTTPRewrite{Uri: "/v1"},
			},
		},
	}}
	return []*model.Service{reviews, ratings, db, ext, headless}, rules, []BoundVirtualService{vs}
}

func TestGoldenOutboundClusters(t *testing.T) {
	services, rules, _ := bookinfo()
	clusters, err := OutboundClusters(services, rules)
	if err != nil {
		t.Fatal(err)
	}
	// 2 special + reviews (1 + 2 subsets) + ratings + mysql + ext + cassandra.
	if len(clusters) != 9 {
		t.Errorf("%d clusters", len(clusters))
	}
	byName := map[string]int{}
	for i, c := range clusters {
		byName[c.Name] = i
	}
	// Auto mTLS: without a DestinationRule TLS setting, sidecar endpoints get
	// mTLS and the others plain text; ISTIO_MUTUAL forces mTLS; external
	// services get neither.
	for name, want := range map[string]int{
		"outbound|9080||ratings.default.svc.cluster.local":   2,
		"outbound|9080|v1|reviews.default.svc.cluster.local": 1,
		"outbound|443||api.example.com":                      0,
	} {
		if got := len(clusters[byName[name]].TransportSocketMatches); got != want {
			t.Errorf("%s has %d transport socket matches, want %d", name, got, want)
		}
	}
	msgs := make([]proto.Message, len(clusters))
	for i, c := range clusters {
		msgs[i] = c
	}
	golden(t, "bookinfo-clusters", msgs...)
}

func TestGoldenOutboundRoutes(t *testing.T) {
	services, _, vss := bookinfo()
	rc, err := OutboundRouteConfig(RouteInput{
		Port: 9080, Services: services[:2], VirtualServices: vss,
		ProxyNamespace: "default", DomainSuffix: "cluster.local",
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Name != "9080" || len(rc.VirtualHosts) != 3 {
		t.Fatalf("route config %s with %d virtual hosts", rc.Name, len(rc.VirtualHosts))
	}
	// reviews: the jason route, then the weighted split.
	if routes := rc.VirtualHosts[0].Routes; len(routes) != 2 || routes[0].Name != "jason" {
		t.Errorf("reviews routes %v", routes)
	}
	// A match that names only a gateway is not a sidecar route.
	gwOnly := BoundVirtualService{Namespace: "default", Spec: &networking.VirtualService{
		Hosts: []string{"ratings"},
		Http: []*networking.HTTPRoute{{
			Name:  "edge-only",
			Match: []*networking.HTTPMatchRequest{{Gateways: []string{"ingress"}}},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "ratings"}}},
		}},
	}}
	edge, err := OutboundRouteConfig(RouteInput{Port: 9080, Services: services[1:2], VirtualServices: []BoundVirtualService{gwOnly}, DomainSuffix: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	if routes := edge.VirtualHosts[0].Routes; len(routes) != 1 || routes[0].Name != "default" {
		t.Errorf("a gateway-only match should leave sidecars the default route, got %v", routes)
	}
	blocked, err := OutboundRouteConfig(RouteInput{Port: 9080, Services: services[1:2], DomainSuffix: "cluster.local", RegistryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "bookinfo-routes-9080", rc, blocked)
}

func TestGoldenLoadAssignment(t *testing.T) {
	eps := []*model.Endpoint{
		{Address: "10.1.0.1", Port: 9080, ServicePort: 9080, Labels: map[string]string{"version": "v1"}, TLSMode: "istio"},
		{Address: "10.1.0.2", Port: 9080, ServicePort: 9080, Labels: map[string]string{"version": "v2"}, TLSMode: "istio"},
		{Address: "192.168.7.9", Port: 9080, ServicePort: 9080, Labels: map[string]string{"version": "v1"}},
	}
	all := LoadAssignment("outbound|9080||reviews.default.svc.cluster.local", eps, nil)
	v1 := LoadAssignment("outbound|9080|v1|reviews.default.svc.cluster.local", eps, map[string]string{"version": "v1"})
	if n := len(v1.Endpoints[0].LbEndpoints); n != 2 {
		t.Errorf("subset v1 has %d endpoints, want 2", n)
	}
	golden(t, "reviews-endpoints", all, v1)
}

func TestClusterNamesRoundTrip(t *testing.T) {
	name := ClusterName(outbound, 9080, "v1", "reviews.default.svc.cluster.local")
	if name != "outbound|9080|v1|reviews.default.svc.cluster.local" {
		t.Fatal(name)
	}
	dir, port, subset, host, ok := ParseClusterName(name)
	if !ok || dir != outbound || port != 9080 || subset != "v1" || host != "reviews.default.svc.cluster.local" {
		t.Errorf("%s %d %s %s %v", dir, port, subset, host, ok)
	}
	for _, bad := range []string{"BlackHoleCluster", "outbound|x||h", "a|b|c"} {
		if _, _, _, _, ok := ParseClusterName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestGoldenListeners(t *testing.T) {
	services, _, _ := bookinfo()
	outboundLs, err := OutboundListeners(services, false)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, l := range outboundLs {
		names = append(names, l.Name)
	}
	// The capture listener, one HTTP listener for 9080, TCP listeners for the
	// database (no address: 0.0.0.0), the external TLS service and the headless
	// service.
	want := []string{"virtualOutbound", "0.0.0.0_9080", "0.0.0.0_3306", "0.0.0.0_443", "0.0.0.0_9042"}
	if len(names) != len(want) {
		t.Fatalf("listeners %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("listener %d is %s, want %s", i, names[i], want[i])
		}
	}
	ports := []InboundPort{{Port: 9080, Protocol: "HTTP"}, {Port: 3306, Protocol: "TCP"}}
	withMode := func(m MTLSMode) []InboundPort {
		out := slices.Clone(ports)
		for i := range out {
			out[i].MTLS = m
		}
		return out
	}
	permissive, err := InboundListener(withMode(MTLSPermissive))
	if err != nil {
		t.Fatal(err)
	}
	// PERMISSIVE: an mTLS and a plain chain per port, and the passthrough.
	if n := len(permissive.FilterChains); n != 5 || len(permissive.ListenerFilters) != 1 {
		t.Errorf("permissive: %d chains, %d listener filters", n, len(permissive.ListenerFilters))
	}
	strict, err := InboundListener(withMode(MTLSStrict))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range strict.FilterChains[:2] {
		if c.TransportSocket == nil || c.FilterChainMatch.TransportProtocol != "tls" {
			t.Errorf("strict chain %s accepts plain text", c.Name)
		}
	}
	disabled, err := InboundListener(withMode(MTLSDisable))
	if err != nil {
		t.Fatal(err)
	}
	if c := disabled.FilterChains[0]; c.TransportSocket != nil || len(disabled.ListenerFilters) != 0 {
		t.Errorf("DISABLE chain %s has TLS, or the listener inspects TLS", c.Name)
	}
	// Port-level modes: a STRICT workload with one port left in plain text.
	mixed, err := InboundListener([]InboundPort{{Port: 9080, Protocol: "HTTP", MTLS: MTLSStrict}, {Port: 3306, Protocol: "TCP", MTLS: MTLSDisable}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mixed.FilterChains) != 3 || mixed.FilterChains[0].TransportSocket == nil || mixed.FilterChains[1].TransportSocket != nil {
		t.Errorf("mixed modes: %d chains", len(mixed.FilterChains))
	}
	msgs := []proto.Message{}
	for _, l := range outboundLs {
		msgs = append(msgs, l)
	}
	msgs = append(msgs, permissive, strict)
	inboundClusters, err := InboundClusters(ports)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inboundClusters {
		msgs = append(msgs, c)
	}
	golden(t, "bookinfo-listeners", msgs...)
}
