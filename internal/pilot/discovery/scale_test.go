package discovery

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/snapshot"
)

// TestScaleFirstSync connects many sidecar-like ADS clients to a running
// control plane and reports how long until every one has its full first
// config (CDS, EDS, LDS, RDS, SDS, each acknowledged). It is a measurement, not a
// check, so it runs only when asked:
//
//	MESHPERF_SCALE_ADDR=127.0.0.1:15010 MESHPERF_SCALE_CLIENTS=2000 \
//	MESHPERF_SCALE_NAMESPACES=50 go test ./internal/pilot/discovery -run TestScaleFirstSync -v
//
// MESHPERF_SCALE_HOLD=30s keeps the clients connected (and acknowledging pushes)
// that long after the sync, to watch what a change pushes.
//
// Clients are spread over namespaces ns-0..ns-(N-1), with labels app=svc-K so
// that each is a workload of one service. (meshperf cpload will replace this
// quick client.)
func TestScaleFirstSync(t *testing.T) {
	addr := os.Getenv("MESHPERF_SCALE_ADDR")
	if addr == "" {
		t.Skip("set MESHPERF_SCALE_ADDR to measure against a running control plane")
	}
	clients := envInt(t, "MESHPERF_SCALE_CLIENTS", 100)
	var hold time.Duration
	if h := os.Getenv("MESHPERF_SCALE_HOLD"); h != "" {
		var err error
		if hold, err = time.ParseDuration(h); err != nil {
			t.Fatalf("MESHPERF_SCALE_HOLD=%q: %v", h, err)
		}
	}
	namespaces := envInt(t, "MESHPERF_SCALE_NAMESPACES", 10)
	conns := make([]*grpc.ClientConn, 0, (clients+99)/100)
	for i := 0; i < cap(conns); i++ { // 100 streams per HTTP/2 connection
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		conns = append(conns, cc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	done := make([]time.Duration, clients)
	bytes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := "ns-" + strconv.Itoa(i%namespaces)
			n, err := firstSyncRetrying(ctx, conns[i/100], ns, "svc-"+strconv.Itoa(i%20), i, hold)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			done[i], bytes[i] = time.Since(start), n
		}()
	}
	wg.Wait()
	slices.Sort(done)
	total := 0
	for _, b := range bytes {
		total += b
	}
	t.Logf("%d clients in %d namespaces: all fully synced after %v (p50 %v, p99 %v); %.1f kB of config per client",
		clients, namespaces, done[len(done)-1].Round(time.Millisecond), done[len(done)/2].Round(time.Millisecond),
		done[len(done)*99/100].Round(time.Millisecond), float64(total)/float64(clients)/1024)
	time.Sleep(hold) // the clients stay connected, acknowledging pushes
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// firstSyncRetrying retries a stream the control plane refused for its
// new-stream rate limit (PILOT_MAX_REQUESTS_PER_SECOND), backing off as Envoy
// does.
func firstSyncRetrying(ctx context.Context, cc *grpc.ClientConn, ns, app string, i int, hold time.Duration) (int, error) {
	backoff := 100 * time.Millisecond
	for {
		n, err := firstSync(ctx, cc, ns, app, i, hold)
		if status.Code(err) != codes.ResourceExhausted {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// firstSync plays one sidecar's start: ask for clusters, listeners and secrets,
// then for the endpoints and routes they name, acknowledging each response.
// It returns the bytes of config received.
func firstSync(ctx context.Context, cc *grpc.ClientConn, ns, app string, i int, hold time.Duration) (int, error) {
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return 0, err
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "LABELS": map[string]any{"app": app}, "SERVICE_ACCOUNT": app})
	node := &corev3.Node{Id: fmt.Sprintf("sidecar~10.%d.%d.%d~%s-%d.%s~%s.svc.cluster.local", i>>16&255, i>>8&255, i&255, app, i, ns, ns), Metadata: meta}
	send := func(r *discoveryv3.DiscoveryRequest) error { r.Node = node; return stream.Send(r) }
	for _, typ := range []string{snapshot.ClusterType, snapshot.ListenerType} {
		if err := send(&discoveryv3.DiscoveryRequest{TypeUrl: typ}); err != nil {
			return 0, err
		}
	}
	if err := send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default", "ROOTCA"}}); err != nil {
		return 0, err
	}
	got, size := map[string]bool{}, 0
	subscribed := map[string][]string{snapshot.SecretType: {"default", "ROOTCA"}}
	for len(got) < 5 {
		r, err := stream.Recv()
		if err != nil {
			return 0, err
		}
		got[r.TypeUrl] = true
		for _, a := range r.Resources {
			size += len(a.Value)
		}
		// An ACK repeats the subscription: in state of the world, names left out
		// are unsubscribed.
		if err := send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: subscribed[r.TypeUrl]}); err != nil {
			return 0, err
		}
		var names []string
		var next string
		switch r.TypeUrl {
		case snapshot.ClusterType:
			next = snapshot.EndpointType
			for _, a := range r.Resources {
				if name := clusterName(a.Value); strings.HasPrefix(name, "outbound|") {
					names = append(names, name)
				}
			}
		case snapshot.ListenerType:
			next = snapshot.RouteType
			for _, a := range r.Resources {
				var l listenerv3.Listener
				if err := a.UnmarshalTo(&l); err == nil && strings.HasPrefix(l.Name, "0.0.0.0_") && len(l.FilterChains) > 0 &&
					l.FilterChains[0].Filters[0].Name == "envoy.filters.network.http_connection_manager" {
					names = append(names, strings.TrimPrefix(l.Name, "0.0.0.0_"))
				}
			}
		}
		if next == "" {
			continue
		}
		if len(names) == 0 {
			got[next] = true // nothing to ask for
			continue
		}
		subscribed[next] = names
		if err := send(&discoveryv3.DiscoveryRequest{TypeUrl: next, ResourceNames: names}); err != nil {
			return 0, err
		}
	}
	if hold > 0 {
		go ackUntil(stream, send, subscribed, hold)
	}
	return size, nil
}

// ackUntil keeps acknowledging pushes for d, then closes the stream.
func ackUntil(stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient,
	send func(*discoveryv3.DiscoveryRequest) error, subscribed map[string][]string, d time.Duration) {
	go func() { time.Sleep(d); _ = stream.CloseSend() }()
	for {
		r, err := stream.Recv()
		if err != nil {
			return
		}
		_ = send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: subscribed[r.TypeUrl]})
	}
}

// clusterName reads field 1 (name) of an encoded Cluster without decoding the
// rest: enough for a load client.
func clusterName(b []byte) string {
	if len(b) < 2 || b[0] != 0x0a {
		return ""
	}
	n, i := 0, 1
	for shift := 0; i < len(b); i++ {
		n |= int(b[i]&0x7f) << shift
		shift += 7
		if b[i] < 0x80 {
			i++
			break
		}
	}
	if i+n > len(b) {
		return ""
	}
	return string(b[i : i+n])
}
