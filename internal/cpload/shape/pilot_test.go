package shape

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/push"
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
	dir := t.TempDir()
	opts := discovery.Options{StorePath: filepath.Join(dir, "config.db"), CADir: filepath.Join(dir, "ca"), Push: push.DefaultOptions()}
	opts.Push.DebounceAfter = 10 * time.Millisecond
	s, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(rs []*config.Resource) {
		t.Helper()
		if _, err := s.Writer().Apply(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	apply(m.All())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(s.GRPCServerOptions()...)
	s.RegisterGRPC(g)
	go func() { _ = g.Serve(ln) }()
	defer func() { g.Stop(); stop(); <-done; _ = s.Close() }()

	f, err := sim.NewFleet(m.Proxies, sim.Options{Target: ln.Addr().String(), ConnectRate: -1})
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
