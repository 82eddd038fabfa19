package discovery_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/testutil"
)

// bulkServices is a namespace of services whose clusters, to a proxy that
// sees them all, make a CDS response larger than a stream's window and
// gRPC's write quota together (64 KiB each), so that a proxy that does not
// read blocks the next send to it.
func bulkServices(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: bulk-%03d, namespace: bulk}
spec:
  selector: {app: bulk-%03d}
  ports: [{name: http, port: 80, targetPort: 8080}]
`, i, i)
	}
	return b.String()
}

// dialStuck opens a SotW stream that asks for clusters and listeners and
// never reads, with a fixed 64 KiB window: the server's send of the
// listeners blocks behind the unread clusters.
func dialStuck(t *testing.T, addr, pod string) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "bulk", "LABELS": map[string]any{"app": "stuck"}})
	node := &corev3.Node{Id: "sidecar~10.0.0.99~" + pod + ".bulk~bulk.svc.cluster.local", Metadata: meta}
	for _, req := range []*discoveryv3.DiscoveryRequest{
		{Node: node, TypeUrl: snapshot.ClusterType}, {TypeUrl: snapshot.ListenerType},
	} {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProxiesThatDoNotReadDoNotStallPushes: a push waited for its proxy's
// stream for as long as the proxy did not read, holding one of the
// PILOT_PUSH_THROTTLE slots, so that as many such proxies as slots (25 on 2
// cores, with no send timeout by default) stopped every push to every
// proxy. Now a push does not wait on a stream stuck in a send: it waits,
// as the connection's one deferred push, for the stream instead.
func TestProxiesThatDoNotReadDoNotStallPushes(t *testing.T) {
	rs, err := config.Decode("mesh.yaml", []byte(baseMesh+bulkServices(400)))
	if err != nil {
		t.Fatal(err)
	}
	const slots = 2
	opts := discoverytest.Options(t)
	opts.Push.PushThrottle = slots
	s, addr := discoverytest.StartWith(t, opts, func(s *discovery.Server) { discoverytest.Apply(t, s, rs) })

	client := dial(t, addr, "shop", "client-1", map[string]string{"app": "client"})
	client.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	client.send(ack(client.recv()))

	for i := range slots {
		dialStuck(t, addr, fmt.Sprintf("stuck-%d", i))
	}
	// Each stuck stream has sent its clusters and is blocked sending its
	// listeners.
	testutil.Eventually(t, 30*time.Second, func() error {
		stuck := 0
		for _, c := range s.Connections() {
			st := c.SyncStatus()
			if strings.Contains(c.ID(), "stuck-") && len(st) == 2 && st[0].NonceSent != "" && st[1].NonceSent == "" {
				stuck++
			}
		}
		if stuck != slots {
			return fmt.Errorf("%d of %d proxies blocked on their listeners", stuck, slots)
		}
		return nil
	})
	// A change only the stuck proxies see: its pushes to them take every
	// slot, and the client's Sidecar skips it. The next change waits for
	// this push to start, so that the debounce does not merge the two.
	pushes := s.PushStatus().Pushes
	discoverytest.ApplyYAML(t, s, subsetRule("bulk", "bulk-000"))
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := s.PushStatus(); st.Pushes == pushes {
			return fmt.Errorf("the push of the first change has not started (pushes: %d)", st.Pushes)
		}
		return nil
	})
	discoverytest.ApplyYAML(t, s, subsetRule("shop", "cart"))
	// A hang guard, not a timing goal.
	deadline := time.After(60 * time.Second)
	for {
		select {
		case r, ok := <-client.responses:
			if !ok {
				t.Fatalf("the client's stream ended: %v", client.endErr)
			}
			if r.TypeUrl == snapshot.ClusterType && strings.Contains(resourceNames(r), "outbound|80|v2|cart.shop.svc.cluster.local") {
				return
			}
		case <-deadline:
			t.Fatalf("the client got no push of its change within 60 s: %d proxies that do not read hold every push slot", slots)
		}
	}
}
