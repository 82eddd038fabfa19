package xds

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// fakeGen returns clusters, endpoints, a listener, routes and secrets whose
// content carries epoch, so a test can tell one generation from the next.
type fakeGen struct {
	mu        sync.Mutex
	epoch     int
	epochOf   map[string]int // per cluster, beside epoch: changes one cluster alone
	clusters  []string
	fail      map[string]error // per type URL
	unchanged bool             // pushes (not requests) return ErrUnchanged
	padding   int              // extra bytes in every cluster body
	calls     int
	lastReq   *model.PushRequest
}

func newFakeGen(clusters ...string) *fakeGen {
	return &fakeGen{clusters: clusters, fail: map[string]error{}}
}

func (g *fakeGen) bump() {
	g.mu.Lock()
	g.epoch++
	g.mu.Unlock()
}

func (g *fakeGen) set(f func(g *fakeGen)) {
	g.mu.Lock()
	f(g)
	g.mu.Unlock()
}

func (g *fakeGen) Generate(_ *model.Proxy, typeURL string, names []string, req *model.PushRequest) (Resources, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	g.lastReq = req
	if err := g.fail[typeURL]; err != nil {
		return nil, err
	}
	if req != nil && g.unchanged {
		return nil, ErrUnchanged
	}
	var res Resources
	add := func(name string, m proto.Message) {
		body, err := anypb.New(m)
		if err != nil {
			panic(err) // test fixture: static messages always encode
		}
		res = append(res, Resource{Name: name, Body: body})
	}
	stamp := fmt.Sprintf("epoch-%d", g.epoch)
	switch typeURL {
	case ClusterType:
		for _, n := range g.clusters {
			if len(names) == 0 || slices.Contains(names, n) {
				name := stamp
				if g.epochOf[n] != 0 {
					name = fmt.Sprintf("%s-%d", stamp, g.epochOf[n])
				}
				add(n, &cluster.Cluster{Name: n, AltStatName: name, EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{
					ServiceName: string(make([]byte, g.padding))}})
			}
		}
	case EndpointType:
		for _, n := range names {
			if slices.Contains(g.clusters, n) {
				add(n, &endpoint.ClusterLoadAssignment{ClusterName: n, Endpoints: []*endpoint.LocalityLbEndpoints{
					{LoadBalancingWeight: wrapperspb.UInt32(uint32(g.epoch + 1))}}})
			}
		}
	case ListenerType:
		add("virtualOutbound", &listener.Listener{Name: "virtualOutbound", StatPrefix: stamp})
	case RouteType:
		for _, n := range names {
			add(n, &route.RouteConfiguration{Name: n, VirtualHosts: []*route.VirtualHost{{Name: stamp}}})
		}
	case SecretType:
		for _, n := range names {
			add(n, &tls.Secret{Name: n})
		}
	}
	return res, nil
}

// fakeHooks records connections and can reject them.
type fakeHooks struct {
	err          error
	connected    chan *Connection
	disconnected chan *Connection
}

func newFakeHooks() *fakeHooks {
	return &fakeHooks{connected: make(chan *Connection, 256), disconnected: make(chan *Connection, 256)}
}

func (h *fakeHooks) OnConnect(c *Connection) error {
	if h.err != nil {
		return h.err
	}
	h.connected <- c
	return nil
}

func (h *fakeHooks) OnDisconnect(c *Connection) { h.disconnected <- c }

// nextConn receives the next connection event from ch (a hook's report, not
// a polled condition), failing after a generous bound (a hang guard, not a
// timing goal).
func nextConn(t testing.TB, ch <-chan *Connection) *Connection {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection event within 10s")
		return nil
	}
}

type testEnv struct {
	srv    *Server
	reg    *prometheus.Registry
	hooks  *fakeHooks
	client discovery.AggregatedDiscoveryServiceClient
}

// newTestEnv serves a Server on 127.0.0.1:0, with its shared-bytes codec as
// production does, and dials it.
func newTestEnv(t testing.TB, gen Generator, opts Options, dial ...grpc.DialOption) *testEnv {
	t.Helper()
	return newTestEnvCodec(t, gen, opts, true, dial...)
}

// newTestEnvCodec is newTestEnv with the choice of codec: the server's own
// (shared) or gRPC's standard proto codec.
func newTestEnvCodec(t testing.TB, gen Generator, opts Options, shared bool, dial ...grpc.DialOption) *testEnv {
	t.Helper()
	e := &testEnv{reg: prometheus.NewRegistry(), hooks: newFakeHooks()}
	e.srv = NewServer(gen, e.hooks, opts, e.reg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var serverOpts []grpc.ServerOption
	if shared {
		serverOpts = append(serverOpts, e.srv.ServerOption())
	}
	gs := grpc.NewServer(serverOpts...)
	e.srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	e.client = discovery.NewAggregatedDiscoveryServiceClient(cc)
	return e
}

const testNodeID = "sidecar~10.1.0.7~reviews-v1-abc.bookinfo~bookinfo.svc.cluster.local"

func testNode(t testing.TB, istioVersion string) *core.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"NAMESPACE":       "reviews-ns",
		"LABELS":          map[string]any{"app": "reviews", "version": "v1"},
		"SERVICE_ACCOUNT": "bookinfo-reviews",
		"INSTANCE_IPS":    "10.1.0.8, fd00::8",
		"WORKLOAD_NAME":   "reviews-v1",
		"ISTIO_VERSION":   istioVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &core.Node{Id: testNodeID, Metadata: md}
}

// testCtx bounds a test's streams so that a bug shows as a failure, not a hang.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sotwClient drives one SotW stream like Envoy would.
type sotwClient struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
	node   *core.Node
}

func (e *testEnv) sotw(t testing.TB, ctx context.Context, node *core.Node) *sotwClient {
	t.Helper()
	stream, err := e.client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &sotwClient{t: t, stream: stream, node: node}
}

func (c *sotwClient) send(req *discovery.DiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		req.Node, c.node = c.node, nil
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// ask sends a request with no nonce: a first request for the type.
func (c *sotwClient) ask(typeURL string, names ...string) {
	c.t.Helper()
	c.send(&discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names})
}

// ack accepts resp, keeping names.
func (c *sotwClient) ack(resp *discovery.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo,
		ResponseNonce: resp.Nonce, ResourceNames: names})
}

func (c *sotwClient) recv() *discovery.DiscoveryResponse {
	c.t.Helper()
	resp, err := c.stream.Recv()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return resp
}

// expect receives the next response and checks its type.
func (c *sotwClient) expect(typeURL string) *discovery.DiscoveryResponse {
	c.t.Helper()
	resp := c.recv()
	if resp.TypeUrl != typeURL {
		c.t.Fatalf("got a %s response, want %s", resp.TypeUrl, typeURL)
	}
	return resp
}

// decode unmarshals every resource of resp into a new T.
func decode[T any, P interface {
	*T
	proto.Message
}](t testing.TB, bodies []*anypb.Any) []P {
	t.Helper()
	out := make([]P, 0, len(bodies))
	for _, b := range bodies {
		m := P(new(T))
		if err := b.UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// metricValue reads one series from reg: a counter's or gauge's value, or a
// histogram's sample count. Missing series read as 0.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// statusOf returns conn's sync state for typeURL.
func statusOf(t testing.TB, conn *Connection, typeURL string) TypeStatus {
	t.Helper()
	for _, st := range conn.SyncStatus() {
		if st.TypeURL == typeURL {
			return st
		}
	}
	t.Fatalf("%s is not watched", typeURL)
	return TypeStatus{}
}
