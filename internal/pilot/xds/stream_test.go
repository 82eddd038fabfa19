package xds

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/testutil"
)

// Pushes from two callers, the proxy's ACKs and debug readers all at once: the
// stream must carry every response whole, each with its own nonce, and end in
// sync. Run with -race.
func TestPushWhileProxyAcks(t *testing.T) {
	gen := newFakeGen("a", "b")
	e := newTestEnv(t, gen, Options{})
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType)
	conn := nextConn(t, e.hooks.connected)

	const pushers, perPusher = 2, 25
	const want = 1 + pushers*perPusher
	nonces := make(chan []string, 1)
	readErr := make(chan error, 1)
	go func() {
		var seen []string
		for len(seen) < want {
			resp, err := c.stream.Recv()
			if err == nil {
				err = c.stream.Send(&discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl,
					VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce})
			}
			if err != nil {
				readErr <- err
				return
			}
			seen = append(seen, resp.Nonce)
		}
		nonces <- seen
	}()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, conn := range e.srv.Connections() {
				conn.SyncStatus()
			}
		}
	})
	var wg sync.WaitGroup
	for range pushers {
		wg.Go(func() {
			for range perPusher {
				gen.bump()
				if err := e.srv.Push(ctx, conn, model.NewPushRequest(model.ReasonConfig, true, time.Now())); err != nil {
					t.Errorf("Push: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	var seen []string
	select {
	case seen = <-nonces:
	case err := <-readErr:
		t.Fatalf("proxy side: %v", err)
	}
	close(stop)
	readers.Wait()
	unique := map[string]bool{}
	for _, n := range seen {
		unique[n] = true
	}
	if len(unique) != want {
		t.Errorf("%d distinct nonces in %d responses", len(unique), want)
	}
	c.ask(ListenerType) // ordered after the last ACK
	c.expect(ListenerType)
	if st := statusOf(t, conn, ClusterType); !st.Synced() || st.NonceSent != seen[len(seen)-1] {
		t.Errorf("not in sync after the last ACK: %+v", st)
	}
}

func TestSendTimeoutEndsStreamOfProxyThatStopsReading(t *testing.T) {
	gen := newFakeGen("a")
	gen.padding = 1 << 20 // well past the 64 KiB stream window
	e := newTestEnv(t, gen, Options{SendTimeout: 200 * time.Millisecond},
		// Fixed windows turn off gRPC's window growth, so unread data blocks.
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, ""))
	c.ask(ClusterType) // and never read
	conn := nextConn(t, e.hooks.connected)
	// gRPC accepts one message whole while it has any write quota, so the
	// answer to the request goes into the buffers; the push after it blocks.
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := conn.SyncStatus(); len(st) != 1 || st[0].NonceSent == "" {
			return fmt.Errorf("the first response was never sent: sync status %+v", st)
		}
		return nil
	})
	err := e.srv.Push(ctx, conn, nil)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), EnvSendTimeout) {
		t.Errorf("Push to a proxy that stopped reading returned %v", err)
	}
	if got := metricValue(t, e.reg, "pilot_xds_write_timeout", nil); got != 1 {
		t.Errorf("pilot_xds_write_timeout = %v, want 1", got)
	}
	if got := metricValue(t, e.reg, "pilot_xds_pushes", map[string]string{"type": "cds_senderr"}); got != 1 {
		t.Errorf("pilot_xds_pushes{type=cds_senderr} = %v, want 1", got)
	}
	if gone := nextConn(t, e.hooks.disconnected); gone != conn {
		t.Errorf("disconnected %s", gone.ID())
	}
	if err := e.srv.Push(ctx, conn, nil); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("Push after the timeout: %v", err)
	}
}

func TestProxyFromNodeMetadata(t *testing.T) {
	meta := func(fields map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p, err := proxyFromNode(&core.Node{Id: testNodeID})
	if err != nil || p.Namespace != "bookinfo" || p.IPAddresses[0] != "10.1.0.7" || p.Labels != nil {
		t.Errorf("id only: %+v, %v", p, err)
	}
	p, err = proxyFromNode(&core.Node{Id: testNodeID, Metadata: meta(map[string]any{"NAMESPACE": "", "INSTANCE_IPS": " , "})})
	if err != nil || p.Namespace != "bookinfo" || p.IPAddresses[0] != "10.1.0.7" {
		t.Errorf("empty metadata values must not erase the id's: %+v, %v", p, err)
	}
	for name, fields := range map[string]map[string]any{
		"ip":        {"INSTANCE_IPS": "10.0.0.1,pod-a"},
		"labels":    {"LABELS": map[string]any{"replicas": 3.0}},
		"labelsStr": {"LABELS": "app=x"},
		"namespace": {"NAMESPACE": true},
		// Validated as istiod validates them (model.Proxy.Validate).
		"badIP":         {"INSTANCE_IPS": "not-an-ip"},
		"badNamespace":  {"NAMESPACE": "Bad_NS!"},
		"badAccount":    {"SERVICE_ACCOUNT": "../admin"},
		"badWorkload":   {"WORKLOAD_NAME": "Reviews V1"},
		"badLabelValue": {"LABELS": map[string]any{"app": "not a label value!"}},
		"badLabelKey":   {"LABELS": map[string]any{"-app": "reviews"}},
	} {
		if _, err := proxyFromNode(&core.Node{Id: testNodeID, Metadata: meta(fields)}); err == nil {
			t.Errorf("%s: %v accepted", name, fields)
		} else if !strings.Contains(err.Error(), testNodeID) {
			t.Errorf("%s: error does not name the node: %v", name, err)
		}
	}
}
