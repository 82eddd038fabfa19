package xds

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/testutil"
)

// What the server keeps for a proxy that does not read, or does not answer,
// is bounded by constants; each test here sends past one bound.

// clientWindow is the flow-control window the tests' proxies advertise,
// fixed (gRPC grows a window it may choose, so fixing it makes the counts
// exact) and gRPC's default.
const clientWindow = 64 << 10

// grpcWriteQuota is what grpc-go lets a stream queue beyond what flow
// control lets it write (its defaultWriteQuota): a Send returns while any
// quota is left, so one message more than that may be queued.
const grpcWriteQuota = 64 << 10

func fixedWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(clientWindow), grpc.WithInitialConnWindowSize(clientWindow)}
}

// A proxy that stops reading is sent what its window takes, then gRPC
// queues up to its write quota and one message; the next send blocks, and
// with PILOT_XDS_SEND_TIMEOUT the stream ends there. Pushes past the bound
// are refused, not buffered.
func TestUnreadResponsesAreBoundedByFlowControl(t *testing.T) {
	const padding = 8 << 10
	gen := newFakeGen("a")
	gen.padding = padding
	e := newTestEnv(t, gen, Options{SendTimeout: stuckSend / 2}, fixedWindows()...)
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType) // and never read
	conn := nextConn(t, e.hooks.connected)

	const tries = 200
	var err error
	for range tries {
		gen.bump()
		if err = e.srv.Push(ctx, conn, nil); err != nil {
			break
		}
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%d pushes to a proxy that does not read: %v, want the send timeout to end the stream", tries, err)
	}
	sent := int(metricValue(t, e.reg, "pilot_xds_pushes", map[string]string{"type": "cds"}))
	// Each response is a little more than padding bytes.
	if most := (clientWindow+grpcWriteQuota)/padding + 2; sent > most || sent*(padding+512) < clientWindow {
		t.Errorf("%d responses of %d KiB accepted for a proxy that reads nothing, want its window's worth and at most %d",
			sent, padding>>10, most)
	}
	if got := metricValue(t, e.reg, "pilot_xds_write_timeout", nil); got != 1 {
		t.Errorf("pilot_xds_write_timeout = %v, want 1", got)
	}
	if gone := nextConn(t, e.hooks.disconnected); gone != conn {
		t.Errorf("disconnected %s", gone.ID())
	}
}

// With no send timeout (Istio's default) a stream blocked in a send to a
// proxy that does not read holds no caller: the push it is sending returns
// once the send has been blocked for stuckSend, and the pushes after it at
// once, all merged into the one push the connection keeps. When the proxy
// reads again it gets what was accepted, then that one push, not one per
// caller.
func TestPushesToAStuckStreamAreDeferred(t *testing.T) {
	gen := newFakeGen("a")
	gen.padding = 16 << 10
	e := newTestEnv(t, gen, Options{}, fixedWindows()...)
	sent := make(chan *model.PushRequest, 256)
	e.srv.SetPushHook(recordingPushHook{added: make(chan *Connection, 1), removed: make(chan *Connection, 1), sent: sent})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType)
	conn := nextConn(t, e.hooks.connected)

	// Push until one does not complete: the stream took it and is blocked
	// sending it.
	accepted := 1 // the answer to the request
	for {
		gen.bump()
		err := e.srv.Push(ctx, conn, nil)
		accepted++
		if errors.Is(err, ErrPushDeferred) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if accepted > 100 {
			t.Fatal("100 pushes went to a proxy that reads nothing")
		}
		<-sent
	}
	const callers = 50
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			req := model.NewPushRequest(model.ReasonConfig, true, time.Unix(int64(1000+i), 0))
			if err := e.srv.Push(ctx, conn, req); !errors.Is(err, ErrPushDeferred) {
				t.Errorf("a push to a stuck stream returned %v, want it deferred", err)
			}
		})
	}
	wg.Wait()
	if got := metricValue(t, e.reg, "pilot_xds_deferred_pushes", nil); got != callers+1 {
		t.Errorf("pilot_xds_deferred_pushes = %v, want %d", got, callers+1)
	}

	// The proxy reads again: the stuck push completes, then the deferred
	// one, the callers' requests merged (the oldest start, every reason).
	types := make(chan string, 256)
	go func() {
		defer close(types)
		for {
			resp, err := c.stream.Recv()
			if err != nil {
				return
			}
			types <- resp.TypeUrl
		}
	}()
	<-sent // the push that was stuck
	deferred := <-sent
	if !deferred.Full || !deferred.Start.Equal(time.Unix(1000, 0)) || deferred.Reason[model.ReasonConfig] != callers {
		t.Errorf("the deferred push was %+v, want the %d callers' requests merged", deferred, callers)
	}
	c.ask(ListenerType) // answered after everything sent before
	received := 0
	for typeURL := range types {
		if typeURL == ListenerType {
			break
		}
		received++
	}
	if received != accepted+1 {
		t.Errorf("the proxy got %d responses, want the %d accepted and the one deferred push: deferred pushes were sent one per caller", received, accepted)
	}
	if conn.hasDeferred() {
		t.Error("a deferred push is still waiting after the stream was free")
	}
}

// A delta proxy that never answers is remembered for its last
// maxUnanswered responses per type: an answer to an older one counts as
// expired, and the server keeps no more.
func TestDeltaUnansweredResponsesAreBounded(t *testing.T) {
	gen := newFakeGen("a")
	e := newTestEnv(t, gen, Options{})
	ctx, cancel := context.WithCancel(testCtx(t))
	c := e.delta(t, ctx, testNode(t, ""))
	c.subscribe(ClusterType)
	conn := nextConn(t, e.hooks.connected)
	nonces := []string{c.expect(ClusterType).Nonce}
	const pushes = 3 * maxUnanswered
	for range pushes {
		gen.bump()
		if err := e.srv.Push(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		nonces = append(nonces, c.expect(ClusterType).Nonce)
	}

	nack := func(nonce string) {
		t.Helper()
		c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: nonce,
			ErrorDetail: &statuspb.Status{Message: "rejected"}})
	}
	oldestKept := len(nonces) - maxUnanswered
	nack(nonces[0])
	nack(nonces[oldestKept-1])
	c.subscribe(ListenerType) // answered once both NACKs were handled
	c.expect(ListenerType)
	if got := metricValue(t, e.reg, "pilot_xds_expired_nonce", map[string]string{"type": "cds"}); got != 2 {
		t.Errorf("pilot_xds_expired_nonce{type=cds} = %v, want 2: NACKs of forgotten responses", got)
	}
	nack(nonces[oldestKept])
	c.subscribe(RouteType, "80")
	// The NACK of a response later ones followed is answered with a resend.
	for resp := c.expect(ClusterType); resp.TypeUrl != RouteType; {
		r, err := c.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		resp = r
	}
	if got := metricValue(t, e.reg, "pilot_total_xds_rejects", map[string]string{"type": "cds"}); got != 1 {
		t.Errorf("pilot_total_xds_rejects{type=cds} = %v, want 1: the oldest response remembered", got)
	}

	cancel()
	nextConn(t, e.hooks.disconnected) // the stream's goroutine is done with the watch
	if got := len(conn.watch(ClusterType).unanswered); got != maxUnanswered {
		t.Errorf("%d unanswered CDS responses kept after %d sent, want %d", got, pushes+2, maxUnanswered)
	}
}

// pilot_xds is labelled by the version each proxy claims: past
// maxVersionLabels versions, or for a value that is no version, proxies
// count as "other" instead of adding series for the life of the process.
func TestVersionLabelsAreBounded(t *testing.T) {
	e := newTestEnv(t, newFakeGen("a"), Options{})
	ctx := testCtx(t)
	const distinct = maxVersionLabels + 8
	for i := range distinct + 1 {
		version := "1." + strconv.Itoa(i) + ".0"
		if i == distinct {
			version = strings.Repeat("9", 1<<16)
		}
		c := e.sotw(t, ctx, testNode(t, version))
		c.ask(ClusterType)
		nextConn(t, e.hooks.connected)
	}
	// OnConnect reports a connection just before the gauge counts it.
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": otherVersion}); got != distinct-maxVersionLabels+1 {
			return fmt.Errorf("pilot_xds{version=other} = %v, want %d", got, distinct-maxVersionLabels+1)
		}
		return nil
	})
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "pilot_xds" {
			series = len(mf.GetMetric())
		}
	}
	if series != maxVersionLabels+1 {
		t.Errorf("%d pilot_xds series for %d versions, want %d and other", series, distinct+1, maxVersionLabels)
	}
	if got := metricValue(t, e.reg, "pilot_xds", map[string]string{"version": "1.0.0"}); got != 1 {
		t.Errorf("pilot_xds{version=1.0.0} = %v, want 1", got)
	}
}
