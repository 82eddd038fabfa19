package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/testutil"
)

// TestFleetAgainstPilot runs 20 simulated sidecars against meshperf's control
// plane, in state of the world and in delta: every proxy must get and
// acknowledge all five types, the rejecting share must show in the control
// plane's pilot_total_xds_rejects, and a new Service must reach every proxy as
// a new cluster.
func TestFleetAgainstPilot(t *testing.T) {
	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name, func(t *testing.T) { testFleet(t, delta) })
	}
}

func testFleet(t *testing.T, delta bool) {
	const n = 20
	s, addr := startPilot(t)
	f, ctx := startFleet(t, specs(n), Options{Target: addr, Delta: delta, NackShare: 0.25, ConnectRate: 500})

	nackers := 0
	for i := range n {
		st := f.Stats(i)
		if st.Connected.IsZero() || st.Synced.Before(st.Connected) {
			t.Errorf("proxy %d: connected %v, synced %v", i, st.Connected, st.Synced)
		}
		rejecting := nacks(i, 0.25)
		if rejecting {
			nackers++
		}
		for _, typ := range Types {
			switch {
			case rejecting && typ == Route:
				if st.Nacks[typ] == 0 || st.Acks[typ] != 0 {
					t.Errorf("proxy %d (rejecting): %s acks %d nacks %d, want only NACKs", i, typ, st.Acks[typ], st.Nacks[typ])
				}
			case st.Acks[typ] == 0 || st.Nacks[typ] != 0:
				t.Errorf("proxy %d: %s acks %d nacks %d, want ACKs only", i, typ, st.Acks[typ], st.Nacks[typ])
			}
			if st.SyncBytes[typ] == 0 {
				t.Errorf("proxy %d: no %s bytes in its first config", i, typ)
			}
		}
	}
	if nackers != 5 {
		t.Fatalf("%d proxies reject, want 5 (a quarter of 20)", nackers)
	}
	// The server counts NACKs as they arrive; the last may still be in flight.
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := counter(t, s, "pilot_total_xds_rejects", "type", "rds"); got < float64(nackers) {
			return fmt.Errorf("pilot_total_xds_rejects{type=rds} = %v, want %d", got, nackers)
		}
		return nil
	})

	// A new Service reaches every proxy as a new cluster (watched before the
	// change is applied).
	cluster := "outbound|80||basket.shop.svc.cluster.local"
	w := f.Watch(cluster)
	applied := time.Now()
	applyYAML(t, s, `
apiVersion: v1
kind: Service
metadata: {name: basket, namespace: shop}
spec:
  selector: {app: basket}
  ports: [{name: http, port: 80}]
`)
	if err := w.Wait(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		at, ok := w.Arrival(i)
		if !ok || at.Before(applied) {
			t.Errorf("proxy %d: %s arrived at %v (ok %v), before the change at %v", i, cluster, at, ok, applied)
		}
		st := f.Stats(i)
		if _, ok := st.FirstAfter(Cluster, applied); !ok {
			t.Errorf("proxy %d: no CDS push after the change", i)
		}
	}

	r := f.Report()
	if r.Proxies != n || r.Connected != n || r.Synced != n || r.Conns != n {
		t.Errorf("report: %d proxies, %d connected, %d synced, %d conns; want %d each", r.Proxies, r.Connected, r.Synced, r.Conns, n)
	}
	if r.AllSynced <= 0 || r.FirstConfig.N != n || r.FirstConfig.Max <= 0 {
		t.Errorf("report: all synced %v, first config %+v", r.AllSynced, r.FirstConfig)
	}
	if r.Nacks < nackers || r.StreamErrors != 0 {
		t.Errorf("report: %d NACKs (want >= %d), %d stream errors", r.Nacks, nackers, r.StreamErrors)
	}
	for _, typ := range Types {
		if tr := r.Types[typ]; tr.Responses < n || tr.SyncBytesMean <= 0 || tr.SyncBytesMax < int64(tr.SyncBytesMean) {
			t.Errorf("report %s: %+v", typ, tr)
		}
	}
	if r.Types[Cluster].Responses < 2*n {
		t.Errorf("%d CDS responses; want at least two per proxy (first config and the new Service)", r.Types[Cluster].Responses)
	}
}

// TestWatchSeesVirtualHost shows that a VirtualService for a new host, which
// changes a route configuration without renaming it, is seen by its virtual
// host's name, and that several proxies may share one gRPC connection.
func TestWatchSeesVirtualHost(t *testing.T) {
	s, addr := startPilot(t)
	f, ctx := startFleet(t, specs(6), Options{Target: addr, ProxiesPerConn: 3, ConnectRate: -1})
	if r := f.Report(); r.Conns != 2 {
		t.Errorf("%d connections for 6 proxies at 3 per connection, want 2", r.Conns)
	}
	w := f.Watch("checkout.example.com:80")
	applyYAML(t, s, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: checkout, namespace: shop}
spec:
  hosts: [checkout.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  location: MESH_EXTERNAL
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: checkout, namespace: shop}
spec:
  hosts: [checkout.example.com]
  http:
  - timeout: 3s
    route: [{destination: {host: checkout.example.com}}]
`)
	if err := w.Wait(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.Unwatch(w)
}

func TestNewFleetRejectsBadInput(t *testing.T) {
	good := specs(2)
	dup := append(specs(1), specs(1)...)
	bad := specs(1)
	bad[0].IP = "not-an-ip"
	for _, tc := range []struct {
		name  string
		specs []ProxySpec
		opts  Options
		want  string
	}{
		{"no target", good, Options{}, "no control plane address"},
		{"no proxies", nil, Options{Target: "x:1"}, "no proxies"},
		{"share", good, Options{Target: "x:1", NackShare: 2}, "not between 0 and 1"},
		{"duplicate", dup, Options{Target: "x:1"}, "same node id"},
		{"bad ip", bad, Options{Target: "x:1"}, "not an IP address"},
	} {
		_, err := NewFleet(tc.specs, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// startFleet connects a fleet and waits until every proxy had its first
// config; the fleet stops and the context (20s) ends with the test.
func startFleet(t *testing.T, sp []ProxySpec, o Options) (*Fleet, context.Context) {
	t.Helper()
	f, ctx := connectFleet(t, sp, o)
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return f, ctx
}

// connectFleet starts a fleet without waiting for its config; the fleet
// stops and the context (20s) ends with the test.
func connectFleet(t *testing.T, sp []ProxySpec, o Options) (*Fleet, context.Context) {
	t.Helper()
	f, err := NewFleet(sp, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f, ctx
}

// cdsOnly is an ADS server that answers the first CDS request with no
// clusters and never answers anything else: a control plane that leaves
// its proxies half configured.
// cdsOnly answers CDS once, with clusters (none if nil), and nothing else.
type cdsOnly struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	clusters []*anypb.Any
}

func (c cdsOnly) StreamAggregatedResources(stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	answered := false
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if req.GetTypeUrl() == Cluster.URL() && !answered {
			answered = true
			if err := stream.Send(&discoveryv3.DiscoveryResponse{TypeUrl: Cluster.URL(), VersionInfo: "1", Nonce: "1", Resources: c.clusters}); err != nil {
				return err
			}
		}
	}
}

// A response beyond grpc-go's default 4 MB limit, as a whole mesh's CDS is,
// is received and acknowledged, as Envoy does.
func TestFleetTakesResponsesOverFourMegabytes(t *testing.T) {
	big, err := anypb.New(&clusterv3.Cluster{Name: strings.Repeat("c", 5<<20)})
	if err != nil {
		t.Fatal(err)
	}
	cc := testutil.ServeGRPC(t, func(g grpc.ServiceRegistrar) {
		discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, cdsOnly{clusters: []*anypb.Any{big}})
	})
	f, _ := connectFleet(t, specs(1), Options{Target: cc.Target(), ConnectRate: -1})
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := f.Stats(0); st.Acks[Cluster] == 0 {
			return fmt.Errorf("no CDS acknowledged; %d stream errors, last %q", st.StreamErrors, st.LastError)
		}
		return nil
	})
	if st := f.Stats(0); st.StreamErrors != 0 || st.Bytes(Cluster) < 5<<20 {
		t.Errorf("stream errors %d (%s), CDS bytes %d", st.StreamErrors, st.LastError, st.Bytes(Cluster))
	}
}

// When the wait times out, the error says which types the proxies lack and
// that the control plane never sent them, rather than only a count.
func TestWaitSyncedSaysWhatIsMissing(t *testing.T) {
	cc := testutil.ServeGRPC(t, func(g grpc.ServiceRegistrar) {
		discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, cdsOnly{})
	})
	f, err := NewFleet(specs(3), Options{Target: cc.Target(), ConnectRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	// Every proxy has its CDS answer before the wait is cut short.
	testutil.Eventually(t, 10*time.Second, func() error {
		for i := range 3 {
			if f.Stats(i).Acks[Cluster] == 0 {
				return fmt.Errorf("proxy %d has no CDS yet", i)
			}
		}
		return nil
	})
	wait, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	err = f.WaitSynced(wait)
	if err == nil {
		t.Fatal("synced against a control plane that sends only CDS")
	}
	for _, want := range []string{"0 of 3 simulated proxies", "3 wait for lds (3 never received any)", "3 wait for sds (3 never received any)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "wait for cds") {
		t.Errorf("error %q says proxies wait for CDS, which they had", err)
	}
}
