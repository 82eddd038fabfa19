package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
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

// startServer runs a control plane on loopback with a fast debounce.
func startServer(t *testing.T) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	opts := Options{StorePath: filepath.Join(dir, "config.db"), CADir: filepath.Join(dir, "ca"), Push: push.DefaultOptions()}
	opts.Push.DebounceAfter = 10 * time.Millisecond
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, baseMesh)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(s.GRPCServerOptions()...)
	s.RegisterGRPC(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); cancel(); <-done; _ = s.Close() })
	for !s.started.Load() {
		time.Sleep(time.Millisecond)
	}
	return s, ln.Addr().String()
}

func apply(t *testing.T, s *Server, yaml string) {
	t.Helper()
	rs, err := config.Decode("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Writer().Apply(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
}

// adsClient is a minimal sidecar: one SotW stream, read by one goroutine (a
// gRPC stream takes one reader at a time).
type adsClient struct {
	t         *testing.T
	stream    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node      *corev3.Node
	responses chan *discoveryv3.DiscoveryResponse
}

func dial(t *testing.T, addr, ns, pod string, labels map[string]string) *adsClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lv := map[string]any{}
	for k, v := range labels {
		lv[k] = v
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "LABELS": lv, "SERVICE_ACCOUNT": pod})
	c := &adsClient{t: t, stream: stream, responses: make(chan *discoveryv3.DiscoveryResponse, 16), node: &corev3.Node{
		Id: "sidecar~10.0.0.7~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: meta,
	}}
	go func() {
		defer close(c.responses)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			c.responses <- r
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

// noResponse returns what arrives within d, nil if nothing does.
func (c *adsClient) noResponse(d time.Duration) *discoveryv3.DiscoveryResponse {
	select {
	case r := <-c.responses:
		return r
	case <-time.After(d):
		return nil
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
	apply(t, s, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart, namespace: shop}
spec:
  host: cart
  subsets: [{name: v2, labels: {version: v2}}]
`)
	pushed := c.recv()
	if pushed.TypeUrl != snapshot.ClusterType || pushed.VersionInfo == cds.VersionInfo ||
		!strings.Contains(resourceNames(pushed), "outbound|80|v2|cart.shop.svc.cluster.local") {
		t.Fatalf("push: %s version %s", pushed.TypeUrl, pushed.VersionInfo)
	}

	// A NACK is counted and not answered with a resend.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: pushed.TypeUrl, VersionInfo: cds.VersionInfo, ResponseNonce: pushed.Nonce,
		ErrorDetail: &statuspb.Status{Code: 3, Message: "cluster rejected"}})
	if r := c.noResponse(300 * time.Millisecond); r != nil {
		t.Errorf("a NACK was answered with %s", r.TypeUrl)
	}
	if got := counter(t, s, "pilot_total_xds_rejects", "cds"); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v", got)
	}

	// A change in a namespace the Sidecar does not import pushes nothing to it.
	apply(t, s, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ledger, namespace: finance}
spec:
  host: ledger
  subsets: [{name: v9, labels: {version: v9}}]
`)
	if r := c.noResponse(500 * time.Millisecond); r != nil {
		t.Errorf("a change outside the proxy's scope was pushed: %s", r.TypeUrl)
	}
	if st := s.PushStatus(); st.Pushes < 2 || st.SkippedTotal < 1 {
		t.Errorf("push status %+v: want two pushes and the second skipped for this proxy", st)
	}
}

// counter reads a counter with a type label from the server's registry.
func counter(t *testing.T, s *Server, name, typ string) float64 {
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
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestSecureXDSServesVerifiableTLS(t *testing.T) {
	s, _ := startServer(t)
	cfg, err := s.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(s.GRPCServerOptions(), grpc.Creds(credentials.NewTLS(cfg)))...)
	s.RegisterGRPC(g)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.RootPEM())
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
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
	bad, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: "istiod.istio-system.svc"})))
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
