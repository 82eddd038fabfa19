package xds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestSotWConnectRequestAckPushNack(t *testing.T) {
	gen := newFakeGen("outbound|80||a.ns.svc.cluster.local", "outbound|80||b.ns.svc.cluster.local")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, "1.22.0"))

	c.ask(ClusterType)
	conn := nextConn(t, e.hooks.connected)
	p := conn.Proxy()
	if p.ID != testNodeID || p.Namespace != "reviews-ns" || p.PodName != "reviews-v1-abc" ||
		!slices.Equal(p.IPAddresses, []string{"10.1.0.8", "fd00::8"}) || p.Labels["app"] != "reviews" ||
		p.ServiceAccount != "bookinfo-reviews" || p.WorkloadName != "reviews-v1" || p.IstioVersion != "1.22.0" {
		t.Errorf("OnConnect saw proxy %+v", p)
	}
	if !strings.HasPrefix(conn.ID(), testNodeID+"-") || conn.Delta() {
		t.Errorf("connection id %q, delta %v", conn.ID(), conn.Delta())
	}

	cds1 := c.expect(ClusterType) // sent after the connection is counted
	if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": "1.22.0"}); got != 1 {
		t.Errorf("pilot_xds = %v while connected, want 1", got)
	}
	if clusters := decode[cluster.Cluster](t, cds1.Resources); len(clusters) != 2 || clusters[0].AltStatName != "epoch-0" {
		t.Fatalf("first CDS: %v", clusters)
	}
	// An ACK needs no answer: the next response must be the one for EDS.
	c.ack(cds1)
	c.ask(EndpointType, "outbound|80||a.ns.svc.cluster.local")
	eds1 := c.expect(EndpointType)
	if st := statusOf(t, conn, ClusterType); st.VersionAcked != cds1.VersionInfo || !st.Synced() {
		t.Errorf("after ACK: %+v", st)
	}
	c.ack(eds1, "outbound|80||a.ns.svc.cluster.local")

	gen.bump()
	if err := e.srv.Push(ctx, conn, &model.PushRequest{Full: true}); err != nil {
		t.Fatalf("Push: %v", err)
	}
	cds2 := c.expect(ClusterType) // clusters before endpoints
	eds2 := c.expect(EndpointType)
	if cds2.VersionInfo == cds1.VersionInfo || cds2.Nonce == cds1.Nonce || cds2.VersionInfo != eds2.VersionInfo {
		t.Errorf("push versions: cds %q -> %q, eds %q", cds1.VersionInfo, cds2.VersionInfo, eds2.VersionInfo)
	}
	if clusters := decode[cluster.Cluster](t, cds2.Resources); clusters[0].AltStatName != "epoch-1" {
		t.Errorf("pushed CDS carries %q, want epoch-1", clusters[0].AltStatName)
	}
	if cla := decode[endpoint.ClusterLoadAssignment](t, eds2.Resources); len(cla) != 1 || cla[0].Endpoints[0].LoadBalancingWeight.GetValue() != 2 {
		t.Errorf("pushed EDS %v", cla)
	}

	// NACK the new clusters: counted, recorded, not re-sent.
	c.send(&discovery.DiscoveryRequest{TypeUrl: ClusterType, VersionInfo: cds1.VersionInfo, ResponseNonce: cds2.Nonce,
		ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "cluster a: bad lb policy"}})
	c.ack(eds2, "outbound|80||a.ns.svc.cluster.local")
	c.ask(ListenerType)
	c.expect(ListenerType)
	if got := metricValue(t, e.reg, "pilot_total_xds_rejects", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v, want 1", got)
	}
	if st := statusOf(t, conn, ClusterType); st.Nacks != 1 || st.LastError != "cluster a: bad lb policy" ||
		st.VersionAcked != cds1.VersionInfo || st.NonceSent != cds2.Nonce {
		t.Errorf("after NACK: %+v", st)
	}
	if got := metricValue(t, e.reg, "pilot_xds_pushes", map[string]string{"type": "cds"}); got != 2 {
		t.Errorf("pilot_xds_pushes{type=cds} = %v, want 2", got)
	}
	if got := metricValue(t, e.reg, "pilot_xds_push_time", map[string]string{"type": "eds"}); got != 2 {
		t.Errorf("pilot_xds_push_time{type=eds} has %v samples, want 2", got)
	}
	if got := metricValue(t, e.reg, "pilot_xds_config_size_bytes", map[string]string{"type": ClusterType}); got != 2 {
		t.Errorf("pilot_xds_config_size_bytes{type=%s} has %v samples, want 2", ClusterType, got)
	}
	// The server observes a send once Send has returned, which may be
	// after the proxy received it.
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := metricValue(t, e.reg, "pilot_xds_send_time", nil); got != 5 {
			return fmt.Errorf("pilot_xds_send_time has %v samples, want 5", got)
		}
		return nil
	})
}

func TestSotWStaleNonceIsIgnored(t *testing.T) {
	gen := newFakeGen("a")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, "1.22.0"))
	c.ask(ClusterType)
	conn := nextConn(t, e.hooks.connected)
	cds1 := c.expect(ClusterType)
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	cds2 := c.expect(ClusterType)
	// The ACK of the first response arrives after the second was sent: stale.
	c.ack(cds1)
	c.ask(ListenerType)
	c.expect(ListenerType) // not a CDS resend
	if got := metricValue(t, e.reg, "pilot_xds_expired_nonce", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_xds_expired_nonce{type=cds} = %v, want 1", got)
	}
	if st := statusOf(t, conn, ClusterType); st.VersionAcked != "" || st.NonceSent != cds2.Nonce {
		t.Errorf("a stale ACK changed the state: %+v", st)
	}
}

func TestSotWNewRouteNamesAreAnswered(t *testing.T) {
	e := newTestEnv(t, newFakeGen(), Options{})
	c := e.sotw(t, testCtx(t), testNode(t, ""))
	c.ask(RouteType, "80")
	rds1 := c.expect(RouteType)
	if got := names(decode[route.RouteConfiguration](t, rds1.Resources)); !slices.Equal(got, []string{"80"}) {
		t.Fatalf("routes %v", got)
	}
	// The same names in another order is a plain ACK; new names are a request.
	c.ack(rds1, "80", "80")
	c.ack(rds1, "443", "80")
	rds2 := c.expect(RouteType)
	if got := names(decode[route.RouteConfiguration](t, rds2.Resources)); !slices.Equal(got, []string{"443", "80"}) {
		t.Errorf("routes after adding 443: %v", got)
	}
	// Dropping every name unsubscribes: no answer, and pushes skip the type.
	c.ack(rds2)
	c.ask(ListenerType)
	c.expect(ListenerType)
	conn := nextConn(t, e.hooks.connected)
	for _, st := range conn.SyncStatus() {
		if st.TypeURL == RouteType {
			t.Errorf("routes still watched after unsubscribing: %+v", st)
		}
	}
}

func names(rcs []*route.RouteConfiguration) []string {
	var out []string
	for _, rc := range rcs {
		out = append(out, rc.Name)
	}
	return out
}

func TestOnConnectErrorRejectsStream(t *testing.T) {
	e := newTestEnv(t, newFakeGen("a"), Options{})
	e.hooks.err = errors.New("workload reviews-v1 in reviews-ns is not allowed to connect")
	c := e.sotw(t, testCtx(t), testNode(t, "1.22.0"))
	c.ask(ClusterType)
	_, err := c.stream.Recv()
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != e.hooks.err.Error() {
		t.Errorf("stream ended with %v, want InvalidArgument %q", err, e.hooks.err)
	}
	if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": "1.22.0"}); got != 0 {
		t.Errorf("a rejected stream counts in pilot_xds: %v", got)
	}
}

func TestBadNodeAndAdmissionRejectStream(t *testing.T) {
	e := newTestEnv(t, newFakeGen("a"), Options{})
	c := e.sotw(t, testCtx(t), nil)
	c.ask(ClusterType)
	if _, err := c.stream.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no node") {
		t.Errorf("no node: %v", err)
	}
	c = e.sotw(t, testCtx(t), testNode(t, ""))
	c.node.Id = "box~1.2.3.4~p.ns~ns.svc.cluster.local"
	c.ask(ClusterType)
	if _, err := c.stream.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `type "box" is not one of sidecar, router, ztunnel, waypoint`) {
		t.Errorf("bad node id: %v", err)
	}

	limited := newTestEnv(t, newFakeGen("a"), Options{Admit: func(context.Context) error { return errors.New("rate: wait exceeds deadline") }})
	c = limited.sotw(t, testCtx(t), testNode(t, ""))
	// The server may end the stream before the request is written: Send then
	// reports io.EOF and the status comes from Recv.
	_ = c.stream.Send(&discovery.DiscoveryRequest{Node: c.node, TypeUrl: ClusterType})
	if _, err := c.stream.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "rate: wait") {
		t.Errorf("admission: %v", err)
	}
}

// recordingPushHook reports connections added and removed, and pushes
// sent when sent is not nil.
type recordingPushHook struct {
	added, removed chan *Connection
	sent           chan *model.PushRequest
}

func (h recordingPushHook) ConnectionAdded(c *Connection)   { h.added <- c }
func (h recordingPushHook) ConnectionRemoved(c *Connection) { h.removed <- c }
func (h recordingPushHook) PushSent(_ *Connection, req *model.PushRequest, _ time.Time) {
	if h.sent != nil {
		h.sent <- req
	}
}

func TestDisconnectRunsHooksAndLowersGauge(t *testing.T) {
	e := newTestEnv(t, newFakeGen("a"), Options{})
	ph := recordingPushHook{added: make(chan *Connection, 1), removed: make(chan *Connection, 1)}
	e.srv.SetPushHook(ph)
	ctx, cancel := context.WithCancel(testCtx(t))
	c := e.sotw(t, ctx, testNode(t, "1.23.1"))
	c.ask(ClusterType)
	c.expect(ClusterType)
	conn := nextConn(t, e.hooks.connected)
	if added := nextConn(t, ph.added); added != conn {
		t.Errorf("push hook got %s, want %s", added.ID(), conn.ID())
	}
	if got := e.srv.Connections(); len(got) != 1 || got[0] != conn {
		t.Errorf("Connections() = %v", got)
	}
	if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": "1.23.1"}); got != 1 {
		t.Errorf("pilot_xds = %v while connected", got)
	}
	cancel()
	if gone := nextConn(t, e.hooks.disconnected); gone != conn {
		t.Errorf("OnDisconnect got %s", gone.ID())
	}
	if removed := nextConn(t, ph.removed); removed != conn {
		t.Errorf("push hook removed %s", removed.ID())
	}
	if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": "1.23.1"}); got != 0 {
		t.Errorf("pilot_xds = %v after disconnect", got)
	}
	if len(e.srv.Connections()) != 0 {
		t.Error("connection still listed")
	}
	if err := e.srv.Push(testCtx(t), conn, nil); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("Push to a closed connection: %v", err)
	}
}

func TestEndpointPushSendsOnlyEndpoints(t *testing.T) {
	gen := newFakeGen("a")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType)
	c.ack(c.expect(ClusterType))
	c.ask(EndpointType, "a")
	c.ack(c.expect(EndpointType), "a")
	conn := nextConn(t, e.hooks.connected)
	req := model.NewPushRequest(model.ReasonEndpoint, false, time.Now())
	if err := e.srv.Push(ctx, conn, req); err != nil {
		t.Fatal(err)
	}
	c.expect(EndpointType)
	// Had clusters been pushed too, they would come before this.
	c.ask(ListenerType)
	c.expect(ListenerType)
	gen.set(func(g *fakeGen) {
		if g.lastReq != nil {
			t.Error("the listener request reached the generator with a push request")
		}
	})
}

func TestGenerationFailureOnPushKeepsStream(t *testing.T) {
	gen := newFakeGen("a")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType)
	c.ack(c.expect(ClusterType))
	c.ask(ListenerType)
	c.ack(c.expect(ListenerType))
	conn := nextConn(t, e.hooks.connected)
	gen.set(func(g *fakeGen) { g.fail[ClusterType] = errors.New("scope not built") })
	err := e.srv.Push(ctx, conn, nil)
	if err == nil || !strings.Contains(err.Error(), "scope not built") {
		t.Errorf("Push returned %v", err)
	}
	c.expect(ListenerType) // the other types still went out
	if got := metricValue(t, e.reg, "pilot_total_xds_internal_errors", nil); got != 1 {
		t.Errorf("pilot_total_xds_internal_errors = %v", got)
	}
	// Unchanged types are skipped without error.
	gen.set(func(g *fakeGen) { delete(g.fail, ClusterType); g.unchanged = true })
	if err := e.srv.Push(ctx, conn, nil); err != nil {
		t.Errorf("unchanged push: %v", err)
	}
	c.ask(RouteType, "80")
	c.expect(RouteType)
	if got := metricValue(t, e.reg, "pilot_total_xds_internal_errors", nil); got != 1 {
		t.Errorf("ErrUnchanged counted as an internal error")
	}
}

// A proxy that asked waits for an answer: if none can be generated, the stream
// ends with the reason, so the proxy logs it and retries.
func TestGenerationFailureOnRequestEndsStream(t *testing.T) {
	gen := newFakeGen("a")
	gen.fail[ListenerType] = errors.New("no gateway for this proxy")
	e := newTestEnv(t, gen, Options{})
	c := e.sotw(t, testCtx(t), testNode(t, ""))
	c.ask(ClusterType)
	c.expect(ClusterType)
	c.ask(ListenerType)
	_, err := c.stream.Recv()
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "no gateway for this proxy") {
		t.Errorf("stream ended with %v", err)
	}
	nextConn(t, e.hooks.disconnected)
	if got := metricValue(t, e.reg, "pilot_total_xds_internal_errors", nil); got != 1 {
		t.Errorf("pilot_total_xds_internal_errors = %v", got)
	}
}

// pilot_xds_awaiting_config counts a stream until it has been sent its full
// config (clusters, then listeners, as Envoy asks), and forgets a stream
// that went away unconfigured.
func TestAwaitingConfigGauge(t *testing.T) {
	e := newTestEnv(t, newFakeGen("a"), Options{})
	awaiting := func() float64 { return metricValue(t, e.reg, "pilot_xds_awaiting_config", nil) }
	configured := e.sotw(t, testCtx(t), testNode(t, "1.23.1"))
	configured.ask(ClusterType)
	configured.expect(ClusterType)
	nextConn(t, e.hooks.connected)
	if got := awaiting(); got != 1 {
		t.Errorf("awaiting %v with clusters sent and no listeners, want 1", got)
	}
	configured.ask(ListenerType)
	configured.expect(ListenerType)
	// The server counts the send after it returned, maybe after the client
	// read it.
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := awaiting(); got != 0 {
			return fmt.Errorf("awaiting %v once listeners were sent, want 0", got)
		}
		return nil
	})

	ctx, cancel := context.WithCancel(testCtx(t))
	left := e.sotw(t, ctx, testNode(t, "1.23.1"))
	left.ask(ClusterType)
	left.expect(ClusterType)
	nextConn(t, e.hooks.connected)
	if got := awaiting(); got != 1 {
		t.Errorf("awaiting %v with a second stream half configured, want 1", got)
	}
	cancel()
	nextConn(t, e.hooks.disconnected)
	if got := awaiting(); got != 0 {
		t.Errorf("awaiting %v after the unconfigured stream went away, want 0", got)
	}
}
