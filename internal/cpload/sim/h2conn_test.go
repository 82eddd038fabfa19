package sim

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/testutil"
)

// limitedServer answers a stream's CDS request, then ends the stream with
// ResourceExhausted, counting how many of its streams are open at once.
type limitedServer struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	open, most atomic.Int32
}

func (l *limitedServer) StreamAggregatedResources(stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	n := l.open.Add(1)
	defer l.open.Add(-1)
	for m := l.most.Load(); n > m && !l.most.CompareAndSwap(m, n); m = l.most.Load() {
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if req.GetTypeUrl() == Cluster.URL() {
			if err := stream.Send(&discoveryv3.DiscoveryResponse{TypeUrl: Cluster.URL(), VersionInfo: "1", Nonce: "1"}); err != nil {
				return err
			}
			// Long enough that the other proxies' streams would be open
			// meanwhile if the client ignored the limit.
			time.Sleep(50 * time.Millisecond)
			return status.Error(codes.ResourceExhausted, "test limit: 50% used")
		}
	}
}

// Proxies sharing a connection open no more streams than the server's
// MAX_CONCURRENT_STREAMS allows: the others wait for a slot, as with grpc-go,
// rather than being refused. A stream ended by grpc-status is recorded with
// its gRPC code and (percent-decoded) message, and the proxy reconnects.
func TestFleetRespectsMaxConcurrentStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxConcurrentStreams(1))
	server := &limitedServer{}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, server)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	const n = 4
	f, _ := connectFleet(t, specs(n), Options{Target: ln.Addr().String(), ProxiesPerConn: n, ConnectRate: -1, BackoffMin: time.Hour})
	testutil.Eventually(t, 10*time.Second, func() error {
		for i := range n {
			if st := f.Stats(i); st.StreamErrors == 0 {
				return fmt.Errorf("proxy %d: no stream ended yet (CDS acks %d)", i, st.Acks[Cluster])
			}
		}
		return nil
	})
	if most := server.most.Load(); most != 1 {
		t.Errorf("%d streams were open at once; the server allows 1", most)
	}
	for i := range n {
		st := f.Stats(i)
		if st.Acks[Cluster] != 1 || !strings.Contains(st.LastError, "ResourceExhausted") || !strings.Contains(st.LastError, "test limit: 50% used") {
			t.Errorf("proxy %d: CDS acks %d, last error %q; want 1 ack and the server's ResourceExhausted", i, st.Acks[Cluster], st.LastError)
		}
	}
	if !strings.Contains(f.Unsynced(), "ResourceExhausted") {
		t.Errorf("Unsynced() = %q, lacks the streams' ResourceExhausted", f.Unsynced())
	}
}

// A server that ends connections with GOAWAY (grpc-go's MaxConnectionAge, as
// istiod's keepalive settings do) makes the proxies reopen their streams on a
// new connection, each getting its config again.
func TestFleetReconnectsAfterGoAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionAge: 200 * time.Millisecond, MaxConnectionAgeGrace: 100 * time.Millisecond,
	}))
	var connections atomic.Int32
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, cdsOnly{})
	go func() { _ = g.Serve(countingListener{ln, &connections}) }()
	t.Cleanup(g.Stop)

	const n = 3
	f, _ := connectFleet(t, specs(n), Options{Target: ln.Addr().String(), ProxiesPerConn: n, ConnectRate: -1, BackoffMin: 10 * time.Millisecond})
	testutil.Eventually(t, 10*time.Second, func() error {
		for i := range n {
			if st := f.Stats(i); st.Acks[Cluster] < 3 {
				return fmt.Errorf("proxy %d: %d CDS acks, %d reconnects, last error %q", i, st.Acks[Cluster], st.Reconnects, st.LastError)
			}
		}
		return nil
	})
	if c := connections.Load(); c < 3 {
		t.Errorf("%d connections accepted; each GOAWAY should have led to a new one", c)
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
