package discovery_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/testutil"
)

// With certificate authentication on (the pilot on Kubernetes), SDS serves
// no secret: a client claiming an identity in its node metadata is
// answered with none (no error to NACK, the stream goes on), the refusal
// is logged and counted, and the rest of its config is still served.
func TestSDSRefusedWithCertificateAuth(t *testing.T) {
	api := kubetest.Start(t)
	var logs testutil.SyncBuffer
	dir := t.TempDir()
	opts := discovery.Options{StorePath: filepath.Join(dir, "config.db"), CADir: filepath.Join(dir, "ca"), Push: push.DefaultOptions(),
		CertificateAuth: ca.NewTokenReviewAuthenticator(api.Client(t)),
		Logger:          slog.New(slog.NewTextHandler(&logs, nil))}
	opts.Push.DebounceAfter = 10 * time.Millisecond
	s, addr := discoverytest.StartWith(t, opts, nil)

	c := dialNode(t, addr, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "cart", map[string]string{"app": "cart"})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default", "ROOTCA"}})
	sds := c.recv()
	if sds.TypeUrl != snapshot.SecretType || len(sds.Resources) != 0 {
		t.Fatalf("SDS for default and ROOTCA: a %s response with %d resources, want an empty SDS answer", sds.TypeUrl, len(sds.Resources))
	}
	ackSDS := ack(sds)
	ackSDS.ResourceNames = []string{"default", "ROOTCA"}
	c.send(ackSDS)
	if got := counter(t, s, "pilot_sds_refused", ""); got != 1 {
		t.Errorf("pilot_sds_refused = %v, want 1", got)
	}
	if got := counter(t, s, "pilot_total_xds_rejects", "sds"); got != 0 {
		t.Errorf("the refusal was NACKed (%v rejects)", got)
	}
	if !strings.Contains(logs.String(), "SDS refused") || !strings.Contains(logs.String(), "cart-1.shop") {
		t.Errorf("no log line names the refused proxy; log:\n%s", logs.String())
	}

	// The stream still serves the rest, and a later push sends no secret.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	if r := c.recv(); r.TypeUrl != snapshot.ClusterType || len(r.Resources) == 0 {
		t.Fatalf("after the refusal: a %s response with %d resources, want clusters", r.TypeUrl, len(r.Resources))
	}
	discoverytest.ApplyYAML(t, s, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: payments, namespace: shop}
spec: {hosts: [payments.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}
`)
	if r := c.recv(); r.TypeUrl != snapshot.ClusterType {
		t.Errorf("the push sent %s first, want clusters", r.TypeUrl)
	}
	if got := counter(t, s, "pilot_xds_pushes", "sds"); got != 1 {
		t.Errorf("pilot_xds_pushes{type=sds} = %v, want 1 (the empty answer, nothing on the push)", got)
	}
}
