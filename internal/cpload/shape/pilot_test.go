package shape

import (
	"context"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
)

// TestBookLabOnPilot loads the book lab (615 resources) into meshperf's
// control plane, connects its 13 workloads as simulated proxies, and applies
// one performance-test repetition: every sidecar must receive the new
// Service's cluster and the ingress gateway the new host's virtual host.
func TestBookLabOnPilot(t *testing.T) {
	m, err := BookLab(BookLabOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, addr := discoverytest.Start(t, nil, m.All()...)
	apply := func(rs []*config.Resource) {
		t.Helper()
		discoverytest.Apply(t, s, rs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	f, err := sim.NewFleet(m.Proxies, sim.Options{Target: addr, ConnectRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	var sidecars, ingress []int
	for i, p := range m.Proxies {
		switch {
		case !p.Router:
			sidecars = append(sidecars, i)
		case p.Labels["istio"] == "ingressgateway":
			ingress = append(ingress, i)
		}
	}
	name := PerfTestName(BookNamespace, 0)
	cluster := f.Watch("outbound|80||" + name + "." + BookNamespace + ".svc.cluster.local")
	vhost := f.Watch(name + ".istioinaction.io:80")
	apply(ServiceGatewayVS(BookNamespace, 0))
	if err := cluster.Wait(ctx, sidecars); err != nil {
		t.Fatalf("sidecars: %v", err)
	}
	if err := vhost.Wait(ctx, ingress); err != nil {
		t.Fatalf("ingress gateway: %v", err)
	}
}
