package xds

import (
	"context"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

type deltaClient struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
	node   *core.Node
}

func (e *testEnv) delta(t testing.TB, ctx context.Context, node *core.Node) *deltaClient {
	t.Helper()
	stream, err := e.client.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &deltaClient{t: t, stream: stream, node: node}
}

func (c *deltaClient) send(req *discovery.DeltaDiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		req.Node, c.node = c.node, nil
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *deltaClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

func (c *deltaClient) ack(resp *discovery.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce})
}

func (c *deltaClient) expect(typeURL string) *discovery.DeltaDiscoveryResponse {
	c.t.Helper()
	resp, err := c.stream.Recv()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	if resp.TypeUrl != typeURL {
		c.t.Fatalf("got a %s response, want %s", resp.TypeUrl, typeURL)
	}
	return resp
}

func resourceNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.Resources {
		out = append(out, r.Name)
	}
	return out
}

func TestDeltaSubscribeAckPushRemoveNack(t *testing.T) {
	gen := newFakeGen("a", "b")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.delta(t, ctx, testNode(t, "1.22.0"))
	c.subscribe(ClusterType) // wildcard
	conn := nextConn(t, e.hooks.connected)
	if !conn.Delta() {
		t.Error("a delta stream's connection says it is not delta")
	}
	cds1 := c.expect(ClusterType)
	if got := resourceNames(cds1); !slices.Equal(got, []string{"a", "b"}) || len(cds1.RemovedResources) != 0 {
		t.Fatalf("first CDS: %v, removed %v", got, cds1.RemovedResources)
	}
	c.ack(cds1)
	// A name that does not exist is answered as removed, so the proxy need not wait for it.
	c.subscribe(EndpointType, "a", "zzz")
	eds1 := c.expect(EndpointType)
	if got := resourceNames(eds1); !slices.Equal(got, []string{"a"}) || !slices.Equal(eds1.RemovedResources, []string{"zzz"}) {
		t.Fatalf("EDS: %v, removed %v", got, eds1.RemovedResources)
	}
	if st := statusOf(t, conn, ClusterType); st.VersionAcked != cds1.SystemVersionInfo || !st.Synced() || !st.Wildcard {
		t.Errorf("CDS after ACK: %+v", st)
	}
	c.ack(eds1)

	// b goes away and a changes: the push carries a, and b as removed.
	gen.set(func(g *fakeGen) { g.clusters = []string{"a"}; g.epoch++ })
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	cds2 := c.expect(ClusterType)
	if got := resourceNames(cds2); !slices.Equal(got, []string{"a"}) || !slices.Equal(cds2.RemovedResources, []string{"b"}) {
		t.Errorf("pushed CDS: %v, removed %v", got, cds2.RemovedResources)
	}
	eds2 := c.expect(EndpointType)
	if eds2.Resources[0].Version == eds1.Resources[0].Version {
		t.Error("changed endpoints kept their version")
	}
	c.ack(eds2)
	// A stale nonce is counted and changes nothing.
	c.ack(cds1)

	// A push that changes nothing sends nothing.
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	// NACK the pushed clusters: counted, not re-sent now, offered again on the next push.
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: cds2.Nonce,
		ErrorDetail: &statuspb.Status{Message: "cluster a: unknown field"}})
	c.subscribe(ListenerType)
	c.expect(ListenerType)
	if got := metricValue(t, e.reg, "pilot_total_xds_rejects", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v", got)
	}
	if got := metricValue(t, e.reg, "pilot_xds_expired_nonce", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_xds_expired_nonce{type=cds} = %v", got)
	}
	if st := statusOf(t, conn, ClusterType); st.Nacks != 1 || st.LastError != "cluster a: unknown field" || st.Synced() {
		t.Errorf("CDS after NACK: %+v", st)
	}
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	if got := resourceNames(c.expect(ClusterType)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("after a NACK the next push sent %v, want the rejected a again", got)
	}

	// Unsubscribed endpoints are neither sent nor reported removed.
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesUnsubscribe: []string{"a"}})
	c.subscribe(RouteType, "80") // answered only once the unsubscribe was applied
	c.expect(RouteType)
	gen.bump()
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	c.expect(ClusterType)
	c.expect(ListenerType)
	c.expect(RouteType)
}

// A NACK can cross a later response on the wire. The rejected resources
// that the later response did not carry are sent again at once, or the
// proxy would go without them until they next change (the waypoint whose
// first listeners were NACKed and whose next push carried only the changed
// main_internal: it never got connect_terminate).
func TestDeltaNackOfAnOvertakenResponseResendsItsResources(t *testing.T) {
	gen := newFakeGen("a", "b")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.delta(t, ctx, testNode(t, ""))
	c.subscribe(ClusterType)
	conn := nextConn(t, e.hooks.connected)
	cds1 := c.expect(ClusterType)

	gen.set(func(g *fakeGen) { g.epochOf = map[string]int{"a": 1} })
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	cds2 := c.expect(ClusterType)
	if got := resourceNames(cds2); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("push sent %v, want only the changed a", got)
	}
	// The proxy rejects cds1 after cds2 was sent: b is in no later response.
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: cds1.Nonce,
		ErrorDetail: &statuspb.Status{Message: "cluster b: bad"}})
	c.subscribe(ListenerType)
	cds3 := c.expect(ClusterType)
	if got := resourceNames(cds3); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after the NACK of an overtaken response the server sent %v, want a and b again", got)
	}
	c.expect(ListenerType)
	if st := statusOf(t, conn, ClusterType); st.Nacks != 1 || st.LastError != "cluster b: bad" {
		t.Errorf("CDS after NACK: %+v", st)
	}
	// The ACK of cds2 is overtaken by cds3: stale. cds3's ACK syncs the proxy.
	c.ack(cds2)
	c.ack(cds3)
	c.subscribe(RouteType, "80") // answered after both ACKs were handled
	c.expect(RouteType)
	if got := metricValue(t, e.reg, "pilot_xds_expired_nonce", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_xds_expired_nonce{type=cds} = %v, want 1 (cds2's ACK)", got)
	}
	if st := statusOf(t, conn, ClusterType); !st.Synced() || st.NonceAcked != cds3.Nonce {
		t.Errorf("CDS after the last ACK: %+v", st)
	}
}

func TestDeltaReconnectSendsOnlyWhatDiffers(t *testing.T) {
	gen := newFakeGen("a", "b")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	first := e.delta(t, ctx, testNode(t, ""))
	first.subscribe(ClusterType)
	cds := first.expect(ClusterType)
	have := map[string]string{}
	for _, r := range cds.Resources {
		have[r.Name] = r.Version
	}

	again := e.delta(t, ctx, testNode(t, ""))
	again.send(&discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, InitialResourceVersions: map[string]string{
		"a": have["a"], "b": "stale", "gone": "1"}})
	resp := again.expect(ClusterType)
	if got := resourceNames(resp); !slices.Equal(got, []string{"b"}) || !slices.Equal(resp.RemovedResources, []string{"gone"}) {
		t.Errorf("reconnect got %v, removed %v; want b, removed gone", got, resp.RemovedResources)
	}
}
