package snapshot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

// mesh1000 is 1000 services (two ports each) in 50 namespaces, with 2000
// registered proxies, as the scale figures use.
func mesh1000(b *testing.B) ([]*config.Resource, *registry.Registry) {
	b.Helper()
	var doc []byte
	for n := range 50 {
		for k := range 20 {
			doc = fmt.Appendf(doc, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: ns-%d}\nspec:\n  selector: {app: svc-%d}\n  ports: [{name: http, port: 80, targetPort: 8080}, {name: grpc, port: 9090}]\n---\n", k, n, k)
		}
	}
	rs, err := config.Decode("mesh.yaml", doc)
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New(registry.Options{}, func(registry.InboundType, *model.PushRequest) {})
	for _, r := range rs {
		reg.Update(nil, r)
	}
	for i := range 2000 {
		reg.ProxyConnected(benchProxy(i))
	}
	return rs, reg
}

func benchProxy(i int) *model.Proxy {
	ns := fmt.Sprintf("ns-%d", i%50)
	return &model.Proxy{ID: fmt.Sprintf("sidecar~10.1.%d.%d~p-%d.%s~%s.svc.cluster.local", i/256, i%256, i, ns, ns),
		Type: model.Sidecar, Namespace: ns, Labels: map[string]string{"app": fmt.Sprintf("svc-%d", i%20)},
		IPAddresses: []string{fmt.Sprintf("10.1.%d.%d", i/256, i%256)}}
}

// BenchmarkBuildSnapshot1000Services is one push's snapshot: the registry's
// services and endpoints, and the scope index.
func BenchmarkBuildSnapshot1000Services(b *testing.B) {
	rs, reg := mesh1000(b)
	for b.Loop() {
		Build(Input{Resources: rs, Registry: reg.Snapshot()})
	}
}

// BenchmarkGenerateProxy1000Services is one proxy's full CDS, LDS and RDS with
// nothing cached (a fresh snapshot, no Sidecar: every service imported).
func BenchmarkGenerateProxy1000Services(b *testing.B) {
	rs, reg := mesh1000(b)
	regSnap := reg.Snapshot()
	p := benchProxy(7)
	for b.Loop() {
		b.StopTimer()
		s := Build(Input{Resources: rs, Registry: regSnap})
		b.StartTimer()
		for _, typ := range []string{ClusterType, ListenerType, RouteType} {
			if _, err := s.Generate(p, typ, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPush100Namespaces is one push of bench pilot's mesh (100
// namespaces, one service and one sidecar each, every scope importing
// every namespace): a fresh snapshot, then each sidecar's clusters,
// endpoints, listeners and routes, as the push generates them. Its
// allocations are most of the control plane's GC work per push.
func BenchmarkPush100Namespaces(b *testing.B) {
	mesh, err := shape.Uniform(shape.UniformOptions{Namespaces: 100, ServicesPerNamespace: 1, Replicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New(registry.Options{}, func(registry.InboundType, *model.PushRequest) {})
	for _, r := range mesh.Resources {
		reg.Update(nil, r)
	}
	proxies := make([]*model.Proxy, 0, len(mesh.Proxies))
	for _, spec := range mesh.Proxies {
		p, err := model.ParseNodeID(spec.NodeID("cluster.local"))
		if err != nil {
			b.Fatal(err)
		}
		p.Labels, p.ServiceAccount, p.IPAddresses = spec.Labels, spec.ServiceAccount, []string{spec.IP}
		reg.ProxyConnected(p)
		proxies = append(proxies, p)
	}
	regSnap := reg.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		s := Build(Input{Resources: mesh.Resources, Registry: regSnap})
		for _, p := range proxies {
			clusters, err := s.Generate(p, ClusterType, nil)
			if err != nil {
				b.Fatal(err)
			}
			var edsNames []string
			for _, c := range clusters {
				if strings.HasPrefix(c.Name, "outbound|") {
					edsNames = append(edsNames, c.Name)
				}
			}
			for _, q := range []struct {
				typ   string
				names []string
			}{{EndpointType, edsNames}, {ListenerType, nil}, {RouteType, nil}} {
				if _, err := s.Generate(p, q.typ, q.names); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(proxies)), "ns/proxy")
}
