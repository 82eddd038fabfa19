package discovery_test

import (
	"log/slog"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestInvalidRegistrationsCannotPoisonEndpoints: one xDS client naming IP
// "not-an-ip" in its node id was registered as a workload, and its address
// reached the EDS of every client of the Service selecting it (Envoy
// rejects a whole response for one malformed address). Such a client, one
// in namespace "Bad_NS!" and one with a label value Kubernetes refuses are
// refused with InvalidArgument and logged, and the Service's clients see
// the honest endpoints only.
func TestInvalidRegistrationsCannotPoisonEndpoints(t *testing.T) {
	rs, err := config.Decode("base.yaml", []byte(baseMesh))
	if err != nil {
		t.Fatal(err)
	}
	logged := &testutil.SyncBuffer{}
	opts := discoverytest.Options(t)
	opts.Logger = slog.New(slog.NewTextHandler(logged, nil))
	_, addr := discoverytest.StartWith(t, opts, func(s *discovery.Server) { discoverytest.Apply(t, s, rs) })

	const cluster = "outbound|80||cart.shop.svc.cluster.local"
	client := dial(t, addr, "shop", "client-1", map[string]string{"app": "client"})
	client.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.EndpointType, ResourceNames: []string{cluster}})
	eds := client.recv()
	client.send(ackNames(eds, cluster))

	cartLabels := map[string]string{"app": "cart"}
	for _, bad := range []struct {
		id, namespace string
		labels        map[string]string
		want          string
	}{
		{"sidecar~not-an-ip~evil-1.shop~shop.svc.cluster.local", "shop", cartLabels, `IP "not-an-ip" is not an IP address`},
		{"sidecar~10.0.0.66~evil-2.shop~shop.svc.cluster.local", "Bad_NS!", cartLabels, `namespace "Bad_NS!"`},
		{"sidecar~10.0.0.67~evil-3.shop~shop.svc.cluster.local", "shop",
			map[string]string{"app": "cart", "version": "not a label value!"}, `label version: value "not a label value!"`},
	} {
		evil := dialNode(t, addr, bad.id, bad.namespace, "cart", bad.labels)
		evil.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
		err := evil.streamEnd()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), bad.want) {
			t.Errorf("%s in %s: the stream ended with %v, want InvalidArgument saying %s", bad.id, bad.namespace, err, bad.want)
		}
	}

	// An honest pod of the Service registers after them: the push that
	// carries its endpoint carries every registration made before it.
	honest := dialNode(t, addr, "sidecar~10.0.0.8~cart-1.shop~shop.svc.cluster.local", "shop", "cart", cartLabels)
	honest.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	honest.recv()
	for {
		pushed := client.recv()
		if pushed.TypeUrl != snapshot.EndpointType {
			continue
		}
		got := endpointsOf(t, pushed)
		for _, poison := range []string{"not-an-ip", "10.0.0.66", "10.0.0.67"} {
			if strings.Contains(got, poison) {
				t.Fatalf("EDS of %s = %q: the refused registration %s reached it", cluster, got, poison)
			}
		}
		client.send(ackNames(pushed, cluster))
		if strings.Contains(got, "10.0.0.8:") {
			break
		}
	}

	line := logged.String()
	for _, want := range []string{"xds stream refused", "code=InvalidArgument", "peer=127.0.0.1:", "not-an-ip"} {
		if !strings.Contains(line, want) {
			t.Errorf("the log lacks %q:\n%s", want, line)
		}
	}
}
