package discovery_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
)

const waypointID = "waypoint~10.1.0.9~waypoint-1.shop~shop.svc.cluster.local"

var waypointLabels = map[string]string{config.GatewayNameLabel: "waypoint"}

// startWaypointMesh serves the snapshot package's waypoint mesh: the shop
// namespace bound to the waypoint Gateway "waypoint", reviews routed to two
// subsets.
func startWaypointMesh(t *testing.T) (*discovery.Server, string) {
	t.Helper()
	data, err := os.ReadFile("../snapshot/testdata/waypoint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := config.Decode("waypoint.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return discoverytest.Start(t, nil, rs...)
}

func namesOf(r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range r.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			continue
		}
		switch v := m.(type) {
		case interface{ GetName() string }:
			out = append(out, v.GetName())
		case interface{ GetClusterName() string }:
			out = append(out, v.GetClusterName())
		}
	}
	slices.Sort(out)
	return out
}

// A waypoint proxy (node type waypoint, labelled with its Gateway's name)
// gets, over a real SotW ADS stream, the waypoint's listeners and clusters,
// its endpoints as internal addresses of connect_originate, and the
// certificate of its own identity, which its token proves; a new endpoint
// of a bound service is pushed to it.
func TestWaypointProxyGetsItsConfig(t *testing.T) {
	s, addr := startWaypointMesh(t)
	ctx := withToken(context.Background(), issueToken(t, s, "shop", "waypoint", "waypoint-1", ""))
	c := dialNodeWith(t, ctx, addr, waypointID, "shop", "waypoint", waypointLabels)

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	cds := c.recv()
	for _, want := range []string{"main_internal", "connect_originate", "outbound|9080|v1|reviews.shop.svc.cluster.local"} {
		if !slices.Contains(namesOf(cds), want) {
			t.Errorf("clusters %v lack %s", namesOf(cds), want)
		}
	}
	if slices.Contains(namesOf(cds), "outbound|9080||details.shop.svc.cluster.local") {
		t.Error("details opted out of the waypoint but is one of its clusters")
	}
	c.send(ack(cds))

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ListenerType})
	lds := c.recv()
	if got := namesOf(lds); !slices.Equal(got, []string{"connect_originate", "connect_terminate", "main_internal"}) {
		t.Errorf("listeners %v", got)
	}
	c.send(ack(lds))

	const v1 = "outbound|9080|v1|reviews.shop.svc.cluster.local"
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.EndpointType, ResourceNames: []string{v1}})
	eds := c.recv()
	if body := resourceNames(eds); !strings.Contains(body, "connect_originate") || !strings.Contains(body, "10.1.0.21:8080") || strings.Contains(body, "10.1.0.22") {
		t.Errorf("reviews v1 endpoints: %q, want 10.1.0.21:8080 through connect_originate only", body)
	}
	ackEDS := ack(eds)
	ackEDS.ResourceNames = []string{v1} // SotW: an ACK restates the names
	c.send(ackEDS)

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default"}})
	sds := c.recv()
	if got := secretIdentity(t, sds); got != "spiffe://cluster.local/ns/shop/sa/waypoint" {
		t.Errorf("the waypoint's certificate is for %q", got)
	}
	ackSDS := ack(sds)
	ackSDS.ResourceNames = []string{"default"}
	c.send(ackSDS)

	discoverytest.ApplyYAML(t, s, `
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: reviews-v1b, namespace: shop}
spec: {address: 10.1.0.25, serviceAccount: reviews, labels: {app: reviews, version: v1}}
`)
	for {
		r := c.recv()
		if r.TypeUrl == snapshot.EndpointType && strings.Contains(resourceNames(r), "10.1.0.25:8080") {
			break
		}
	}
}

func secretIdentity(t *testing.T, r *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("%d secrets", len(r.Resources))
	}
	var sec tlsv3.Secret
	if err := r.Resources[0].UnmarshalTo(&sec); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes())
	if block == nil {
		t.Fatal("no PEM certificate in the secret")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || len(cert.URIs) != 1 {
		t.Fatalf("certificate: %v, URIs %v", err, cert.URIs)
	}
	return cert.URIs[0].String()
}

// A waypoint proxy that does not say which Gateway it serves is refused.
func TestWaypointProxyWithoutGatewayIsRefused(t *testing.T) {
	_, addr := startWaypointMesh(t)
	c := dialNode(t, addr, waypointID, "shop", "waypoint", nil)
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	err := c.streamEnd()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), config.GatewayNameLabel) {
		t.Errorf("stream ended with %v, want InvalidArgument naming %s", err, config.GatewayNameLabel)
	}
}

// Delta ADS on the TLS port serves a waypoint too.
func TestWaypointProxyOverDeltaTLS(t *testing.T) {
	s, _ := startWaypointMesh(t)
	_, cc := serveTLS(t, s)
	n := openNodeProxyStream(t, cc)
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "SERVICE_ACCOUNT": "waypoint",
		"LABELS": map[string]any{config.GatewayNameLabel: "waypoint"}})
	n.send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: waypointID, Metadata: meta}, TypeUrl: snapshot.ListenerType})
	r := n.next()
	var got []string
	for _, res := range r.Resources {
		got = append(got, res.Name)
	}
	slices.Sort(got)
	if r.TypeUrl != snapshot.ListenerType || !slices.Equal(got, []string{"connect_originate", "connect_terminate", "main_internal"}) {
		t.Errorf("delta listeners: %s %v", r.TypeUrl, got)
	}
}
