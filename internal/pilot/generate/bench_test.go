package generate

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// benchMesh is 200 HTTP services on port 9080 in 10 namespaces, each with
// the bookinfo reviews service's DestinationRule (two subsets, pool and TLS
// settings) and VirtualService (a header match with a fault, a weighted
// split with retries and a rewrite), routing to themselves: generation with
// every kind of route and cluster setting the generator writes.
func benchMesh() ([]*model.Service, DestinationRules, []BoundVirtualService) {
	templates, templateRules, templateVSs := bookinfo()
	reviews, dr, vs := templates[0], templateRules(templates[0].Hostname), templateVSs[0]
	var services []*model.Service
	rules := map[string]*networking.DestinationRule{}
	var vss []BoundVirtualService
	for i := range 200 {
		ns, name := fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("svc-%d", i)
		svc := *reviews
		svc.Key = config.Key{Kind: config.KindService, Namespace: ns, Name: name}
		svc.Namespace = ns
		svc.Hostname = fmt.Sprintf("%s.%s.svc.cluster.local", name, ns)
		svc.Addresses = []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}
		services = append(services, &svc)
		rules[svc.Hostname] = dr
		spec := proto.Clone(vs.Spec).(*networking.VirtualService)
		spec.Hosts = []string{svc.Hostname}
		for _, route := range spec.Http {
			for _, dest := range route.Route {
				dest.Destination.Host = svc.Hostname
			}
		}
		vss = append(vss, BoundVirtualService{Namespace: ns, Spec: spec})
	}
	return services, func(host string) *networking.DestinationRule { return rules[host] }, vss
}

// BenchmarkOutboundConfig is one sidecar's outbound CDS, LDS and RDS for
// port 9080 from a 200-service mesh, straight from the generator (the
// snapshot's BenchmarkGenerateProxy1000Services adds scoping and caching).
func BenchmarkOutboundConfig(b *testing.B) {
	services, rules, vss := benchMesh()
	b.ReportAllocs()
	for b.Loop() {
		clusters, err := OutboundClusters(services, rules)
		if err != nil || len(clusters) != 3*len(services)+2 {
			b.Fatalf("%d clusters: %v", len(clusters), err)
		}
		if _, err := OutboundListeners(services, false); err != nil {
			b.Fatal(err)
		}
		rc, err := OutboundRouteConfig(RouteInput{Port: 9080, Services: services, VirtualServices: vss, ProxyNamespace: "ns-0", DomainSuffix: "cluster.local"})
		if err != nil || len(rc.VirtualHosts) != len(services)+1 {
			b.Fatalf("%d virtual hosts: %v", len(rc.VirtualHosts), err)
		}
	}
}
