package discovery_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"istio.io/istio/pkg/workloadapi"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
)

const ztunnelID = "ztunnel~10.0.0.2~ztunnel-a.istio-system~istio-system.svc.cluster.local"

// nodeProxyStream is a node proxy's delta ADS stream, read by one goroutine.
type nodeProxyStream struct {
	t         *testing.T
	stream    grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	responses chan *discoveryv3.DeltaDiscoveryResponse
}

func openNodeProxyStream(t *testing.T, cc *grpc.ClientConn) *nodeProxyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := &nodeProxyStream{t: t, stream: stream, responses: make(chan *discoveryv3.DeltaDiscoveryResponse, 16)}
	go func() {
		defer close(n.responses)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			n.responses <- r
		}
	}()
	return n
}

func (n *nodeProxyStream) send(r *discoveryv3.DeltaDiscoveryRequest) {
	n.t.Helper()
	if err := n.stream.Send(r); err != nil {
		n.t.Fatal(err)
	}
}

// next waits for the next response and ACKs it, as ztunnel does.
func (n *nodeProxyStream) next() *discoveryv3.DeltaDiscoveryResponse {
	n.t.Helper()
	select {
	case r, ok := <-n.responses:
		if !ok {
			n.t.Fatal("the stream ended")
		}
		n.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		return r
	case <-time.After(10 * time.Second): // a hang guard, not a timing goal
		n.t.Fatal("no response within 10s")
	}
	return nil
}

// A node proxy subscribes to both WDS types over delta ADS on the TLS port,
// presenting no client certificate: both are answered though empty (ztunnel
// is not ready until it has ACKed both), then a WorkloadEntry added arrives
// and, deleted, is removed.
func TestNodeProxyGetsWorkloadDiscoveryOverTLS(t *testing.T) {
	s, _ := discoverytest.Start(t, nil)
	_, cc := serveTLS(t, s)
	n := openNodeProxyStream(t, cc)
	node := &corev3.Node{Id: ztunnelID}
	n.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: snapshot.AddressType})
	n.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: snapshot.AuthorizationType, ResourceNamesSubscribe: []string{"*"}})
	for _, want := range []string{snapshot.AddressType, snapshot.AuthorizationType} {
		r := n.next()
		if r.TypeUrl != want || len(r.Resources) != 0 || len(r.RemovedResources) != 0 {
			t.Fatalf("first answer: %v, want an empty %s", r, want)
		}
	}

	discoverytest.ApplyYAML(t, s, `
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio.io/dataplane-mode: ambient}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: cart-1, namespace: shop}
spec: {address: 10.1.0.5, serviceAccount: cart, labels: {app: cart}}
`)
	if _, err := s.ConfigDump(ztunnelID); err == nil || !strings.Contains(err.Error(), "is a node proxy (ztunnel)") {
		t.Errorf("config dump of a node proxy: %v", err)
	}
	const uid = "Kubernetes//Pod/shop/cart-1"
	var got *workloadapi.Workload
	for got == nil {
		r := n.next()
		for _, res := range r.Resources {
			addr := &workloadapi.Address{}
			if err := res.Resource.UnmarshalTo(addr); err != nil {
				t.Fatal(err)
			}
			if res.Name == uid {
				got = addr.GetWorkload()
			}
		}
	}
	if got.GetTunnelProtocol() != workloadapi.TunnelProtocol_HBONE || got.GetServiceAccount() != "cart" ||
		len(got.GetAddresses()) != 1 || !bytes.Equal(got.GetAddresses()[0], []byte{10, 1, 0, 5}) {
		t.Errorf("workload %v", got)
	}

	// A policy change reaches the node proxy though no sidecar depends on it.
	discoverytest.ApplyYAML(t, s, `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: no-legacy, namespace: shop}
spec:
  action: DENY
  rules: [{from: [{source: {namespaces: [legacy]}}]}]
`)
	for policy := false; !policy; {
		r := n.next()
		for _, res := range r.Resources {
			policy = policy || (r.TypeUrl == snapshot.AuthorizationType && res.Name == "shop/no-legacy")
		}
	}

	if _, err := s.Writer().Delete(context.Background(), []config.Key{{Kind: config.KindWorkloadEntry, Namespace: "shop", Name: "cart-1"}}); err != nil {
		t.Fatal(err)
	}
	for {
		r := n.next()
		if slices.Contains(r.RemovedResources, uid) {
			if r.TypeUrl != snapshot.AddressType {
				t.Errorf("%s removed in a %s response", uid, r.TypeUrl)
			}
			break
		}
	}
}
