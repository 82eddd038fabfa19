package discovery_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/testutil"
)

const baseMesh = `
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec:
  selector: {app: cart}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ledger, namespace: finance}
spec:
  selector: {app: ledger}
  ports: [{name: http, port: 80}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress:
  - hosts: ["./*"]
`

// subsetRule is a DestinationRule giving the service name in ns a subset
// v2: a change to the clusters of every proxy that sees the service.
func subsetRule(ns, name string) string {
	return fmt.Sprintf(`
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  host: %[2]s
  subsets: [{name: v2, labels: {version: v2}}]
`, ns, name)
}

// startServer runs a control plane on loopback with baseMesh.
func startServer(t *testing.T) (*discovery.Server, string) {
	t.Helper()
	rs, err := config.Decode("base.yaml", []byte(baseMesh))
	if err != nil {
		t.Fatal(err)
	}
	return discoverytest.Start(t, nil, rs...)
}

// adsClient is a minimal sidecar: one SotW stream, read by one goroutine (a
// gRPC stream takes one reader at a time).
type adsClient struct {
	t         *testing.T
	stream    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node      *corev3.Node
	responses chan *discoveryv3.DiscoveryResponse // closed when the stream ends
	endErr    error                               // why it ended; read once responses is closed
}

func dial(t *testing.T, addr, ns, pod string, labels map[string]string) *adsClient {
	t.Helper()
	return dialNode(t, addr, "sidecar~10.0.0.7~"+pod+"."+ns+"~"+ns+".svc.cluster.local", ns, pod, labels)
}

// dialNode opens a SotW stream as the node id, with Istio's node metadata.
func dialNode(t *testing.T, addr, id, ns, serviceAccount string, labels map[string]string) *adsClient {
	t.Helper()
	return dialNodeWith(t, context.Background(), addr, id, ns, serviceAccount, labels)
}

// dialNodeWith is dialNode with the stream's context, which may carry a
// credential in its outgoing metadata.
func dialNodeWith(t *testing.T, ctx context.Context, addr, id, ns, serviceAccount string, labels map[string]string) *adsClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lv := map[string]any{}
	for k, v := range labels {
		lv[k] = v
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "LABELS": lv, "SERVICE_ACCOUNT": serviceAccount})
	c := &adsClient{t: t, stream: stream, responses: make(chan *discoveryv3.DiscoveryResponse, 16), node: &corev3.Node{
		Id: id, Metadata: meta,
	}}
	testOver := make(chan struct{})
	t.Cleanup(func() { close(testOver) }) // before the connection closes
	go func() {
		defer close(c.responses)
		for {
			r, err := stream.Recv()
			if err != nil {
				c.endErr = err
				return
			}
			select {
			case c.responses <- r:
			case <-testOver: // responses nobody will read
				return
			}
		}
	}()
	return c
}

func (c *adsClient) send(req *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	req.Node = c.node
	if err := c.stream.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits for the next response, failing after a while.
func (c *adsClient) recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	select {
	case r, ok := <-c.responses:
		if !ok {
			c.t.Fatal("the stream ended")
		}
		return r
	case <-time.After(10 * time.Second):
		c.t.Fatal("no response within 10 s")
	}
	return nil
}

// streamEnd waits for the stream to end without a response and returns why.
func (c *adsClient) streamEnd() error {
	c.t.Helper()
	select {
	case r, ok := <-c.responses:
		if ok {
			c.t.Fatalf("got a %s response, want the stream to end", r.TypeUrl)
		}
		return c.endErr
	case <-time.After(10 * time.Second):
		c.t.Fatal("the stream did not end within 10 s")
	}
	return nil
}

// expectNothingBefore asks for typeURL afresh and fails if any other response
// arrives before its answer. The server handles a stream's requests one at a
// time, in order, so a reply to an earlier request (a resend after a NACK)
// would arrive ahead of this answer: no waiting on the clock for silence.
func (c *adsClient) expectNothingBefore(typeURL, after string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL})
	if r := c.recv(); r.TypeUrl != typeURL {
		c.t.Errorf("%s was answered with %s", after, r.TypeUrl)
	}
}

func ack(r *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
}

func resourceNames(r *discoveryv3.DiscoveryResponse) string {
	var b strings.Builder
	for _, a := range r.Resources {
		b.WriteString(string(a.Value))
	}
	return b.String()
}

func TestADSClientGetsConfigPushesAndNACKs(t *testing.T) {
	s, addr := startServer(t)
	c := dial(t, addr, "shop", "cart-1", map[string]string{"app": "cart"})

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	cds := c.recv()
	if cds.TypeUrl != snapshot.ClusterType || !strings.Contains(resourceNames(cds), "outbound|80||cart.shop.svc.cluster.local") {
		t.Fatalf("first CDS: %s", cds.TypeUrl)
	}
	if strings.Contains(resourceNames(cds), "ledger.finance") {
		t.Error("the Sidecar imports only ./*, but finance's ledger was sent")
	}
	if !strings.Contains(resourceNames(cds), "inbound|8080||") {
		t.Error("the proxy serves cart's port 8080 but has no inbound cluster for it")
	}
	c.send(ack(cds))

	// A change the proxy depends on is pushed to it.
	discoverytest.ApplyYAML(t, s, subsetRule("shop", "cart"))
	pushed := c.recv()
	if pushed.TypeUrl != snapshot.ClusterType || pushed.VersionInfo == cds.VersionInfo ||
		!strings.Contains(resourceNames(pushed), "outbound|80|v2|cart.shop.svc.cluster.local") {
		t.Fatalf("push: %s version %s", pushed.TypeUrl, pushed.VersionInfo)
	}

	// A NACK is counted and not answered with a resend.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: pushed.TypeUrl, VersionInfo: cds.VersionInfo, ResponseNonce: pushed.Nonce,
		ErrorDetail: &statuspb.Status{Code: 3, Message: "cluster rejected"}})
	c.expectNothingBefore(snapshot.ListenerType, "the NACK")
	if got := counter(t, s, "pilot_total_xds_rejects", "cds"); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v", got)
	}

	// A change in a namespace the Sidecar does not import pushes nothing to it.
	discoverytest.ApplyYAML(t, s, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ledger, namespace: finance}
spec:
  host: ledger
  subsets: [{name: v9, labels: {version: v9}}]
`)
	// The dependency filter decides per proxy; a skip means nothing is sent.
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := s.PushStatus(); st.Pushes < 2 || st.SkippedTotal < 1 {
			return fmt.Errorf("push status %+v: want two pushes and the second skipped for this proxy", st)
		}
		return nil
	})
	c.expectNothingBefore(snapshot.ListenerType, "the change outside the proxy's scope")
}

// TestStreamBeforeFirstSnapshotIsRefused: meshperf pilot serves its
// listeners before Run has made the first snapshot, and a proxy that connected
// in between crashed the control plane (the connect hook read a nil snapshot).
// Such a stream is refused with Unavailable, as istiod refuses streams before
// its caches have synced, and the proxy's next attempt after that is served.
func TestStreamBeforeFirstSnapshotIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := discovery.New(discovery.Options{StorePath: filepath.Join(dir, "config.db"), CADir: filepath.Join(dir, "ca"),
		Push: push.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(s.GRPCServerOptions()...)
	s.RegisterGRPC(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	addr := ln.Addr().String()

	early := dial(t, addr, "shop", "cart-1", map[string]string{"app": "cart"})
	early.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	if err := early.streamEnd(); status.Code(err) != codes.Unavailable {
		t.Fatalf("a stream before the first snapshot ended with %v, want Unavailable", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-s.Serving():
	case <-time.After(10 * time.Second):
		t.Fatal("no first snapshot within 10s")
	}
	later := dial(t, addr, "shop", "cart-1", map[string]string{"app": "cart"})
	later.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	if r := later.recv(); r.TypeUrl != snapshot.ClusterType {
		t.Errorf("after the first snapshot: a %s response, want clusters", r.TypeUrl)
	}
}

// counter reads a counter with a type label from the server's registry;
// typ "" reads one without labels.
func counter(t *testing.T, s *discovery.Server, name, typ string) float64 {
	t.Helper()
	families, err := s.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if typ == "" && len(m.GetLabel()) == 0 {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// serveTLS serves s's gRPC services on a TLS port, as --secureGRPCAddr does,
// and returns its address and a client connection that trusts the mesh root
// and presents no certificate (as ztunnel's does).
func serveTLS(t *testing.T, s *discovery.Server) (string, *grpc.ClientConn) {
	t.Helper()
	cfg, err := s.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(s.GRPCServerOptions(), grpc.Creds(credentials.NewTLS(cfg)))...)
	s.RegisterSecureGRPC(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.RootPEM())
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return ln.Addr().String(), cc
}

func TestSecureXDSServesVerifiableTLS(t *testing.T) {
	s, _ := startServer(t)
	addr, cc := serveTLS(t, s)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop"})
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType,
		Node: &corev3.Node{Id: "sidecar~10.0.0.9~x-1.shop~shop.svc.cluster.local", Metadata: meta}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil || r.TypeUrl != snapshot.ClusterType || len(r.Resources) == 0 {
		t.Fatalf("over TLS: %v %v", r, err)
	}

	// A client that does not trust the mesh root gets nothing.
	bad, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if s2, err := discoveryv3.NewAggregatedDiscoveryServiceClient(bad).StreamAggregatedResources(context.Background()); err == nil {
		if _, err := s2.Recv(); err == nil {
			t.Error("a client without the mesh root got a response")
		}
	}
}

// TestChangesReachProxiesAfterTheConfigWatchFellBehind: a write larger than
// the store watch's buffer (a whole mesh applied at once, as cpload does at
// ten times Istio's scale) ends the watch with a Resync. The control plane
// relisted then but did not watch again, so no later change ever reached a
// proxy. Now it lists, watches again and pushes everything. (That the relist
// also applies deletions missed while behind is the registry's
// TestReplaceConfigDropsWhatTheListingLacks.)
func TestChangesReachProxiesAfterTheConfigWatchFellBehind(t *testing.T) {
	opts := discoverytest.Options(t)
	opts.WatchBuffer = 4
	base, err := config.Decode("base.yaml", []byte(baseMesh))
	if err != nil {
		t.Fatal(err)
	}
	s, addr := discoverytest.StartWith(t, opts, func(s *discovery.Server) { discoverytest.Apply(t, s, base) })
	c := dial(t, addr, "shop", "cart-1", map[string]string{"app": "cart"})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	c.send(ack(c.recv()))

	const bulk = 6 // more than the buffer, in one write
	var yaml strings.Builder
	for i := range bulk {
		fmt.Fprintf(&yaml, "---\napiVersion: v1\nkind: Service\nmetadata: {name: bulk-%d, namespace: shop}\nspec:\n  selector: {app: bulk}\n  ports: [{name: http, port: 80}]\n", i)
	}
	discoverytest.ApplyYAML(t, s, yaml.String())
	cds := c.recvUntil(func(r *discoveryv3.DiscoveryResponse) bool {
		return strings.Contains(resourceNames(r), fmt.Sprintf("bulk-%d.shop", bulk-1))
	})
	if !strings.Contains(resourceNames(cds), "bulk-0.shop") {
		t.Fatalf("after the bulk write: %s", resourceNames(cds))
	}

	// A change after the watch fell behind still reaches the proxy.
	if _, err := s.Writer().Delete(context.Background(), []config.Key{{Kind: config.KindService, Namespace: "shop", Name: "bulk-0"}}); err != nil {
		t.Fatal(err)
	}
	c.recvUntil(func(r *discoveryv3.DiscoveryResponse) bool {
		return r.TypeUrl == snapshot.ClusterType && !strings.Contains(resourceNames(r), "bulk-0.shop")
	})
}

// recvUntil acks responses until one satisfies ok, and returns it; it fails
// when none comes within recv's bound.
func (c *adsClient) recvUntil(ok func(*discoveryv3.DiscoveryResponse) bool) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	for {
		r := c.recv()
		c.send(ack(r))
		if ok(r) {
			return r
		}
	}
}
