package scope

import (
	"fmt"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// benchMesh is the published scale anchor: 1000 services and 2000 sidecars in
// 50 namespaces, each service with a VirtualService and a DestinationRule.
func benchMesh(meshWideSidecar bool) ([]*config.Resource, []*model.Proxy) {
	const namespaces, services, proxies = 50, 1000, 2000
	var rs []*config.Resource
	for i := range services {
		ns := fmt.Sprint("ns", i%namespaces)
		name := fmt.Sprint("svc", i)
		rs = append(rs,
			kubeSvc(ns, name, "", 8080),
			virtualService(ns, name, []string{name}, nil, nil, name),
			destRule(ns, name, name),
		)
	}
	rs = append(rs, kubeSvc("istio-system", "istiod", "", 15012))
	if meshWideSidecar {
		rs = append(rs, sidecarRes("istio-system", "default", 0, nil, "./*", "istio-system/*"))
	}
	ps := make([]*model.Proxy, proxies)
	for i := range ps {
		ps[i] = sidecarProxy(fmt.Sprint("ns", i%namespaces), map[string]string{"app": fmt.Sprint("svc", i%services)})
	}
	return rs, ps
}

func BenchmarkIndexFor(b *testing.B) {
	for _, mode := range []struct {
		name    string
		sidecar bool
	}{{"mesh-wide-sidecar", true}, {"no-sidecar", false}} {
		b.Run(mode.name, func(b *testing.B) {
			rs, ps := benchMesh(mode.sidecar)
			b.ReportAllocs()
			var imported int
			for b.Loop() {
				ix := NewIndex(Input{Resources: rs})
				imported = 0
				for _, p := range ps {
					imported += len(ix.For(p).Services())
				}
			}
			b.ReportMetric(float64(imported)/float64(len(ps)), "services/proxy")
		})
	}
}

// TestBenchMeshScoping keeps the benchmark's premise honest: the mesh-wide
// Sidecar imports a namespace's 20 services plus istiod, instead of all 1001.
func TestBenchMeshScoping(t *testing.T) {
	for _, c := range []struct {
		sidecar bool
		want    int
	}{{true, 21}, {false, 1001}} {
		rs, ps := benchMesh(c.sidecar)
		ix := NewIndex(Input{Resources: rs})
		sc := ix.For(ps[0])
		if got := len(sc.Services()); got != c.want {
			t.Errorf("sidecar=%v: %d services, want %d", c.sidecar, got, c.want)
		}
		if got := len(sc.VirtualServices()); c.sidecar && got != 20 {
			t.Errorf("mesh-wide Sidecar: %d VirtualServices, want 20", got)
		}
		if ix.For(ps[50]) != sc {
			t.Errorf("proxies in one namespace must share a scope")
		}
	}
}
