package discovery_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
)

// shopPodsOnNodes places two pods of the shop namespace on two nodes, as
// the lab's ambient WorkloadEntries do: cart-1 (cart) on node-1 and
// payments-1 (payments) on node-2.
const shopPodsOnNodes = `
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: cart-1, namespace: shop}
spec: {address: 10.0.0.7, serviceAccount: cart, labels: {app: cart, topology.istio.io/node: node-1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: payments-1, namespace: shop}
spec: {address: 10.0.0.8, serviceAccount: payments, labels: {app: payments, topology.istio.io/node: node-2}}
`

// withToken is ctx carrying token as istio-agent and ztunnel send it.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// issueToken is a token from s for the identity, bound to pod and node
// when they are not empty.
func issueToken(t *testing.T, s *discovery.Server, ns, sa, pod, node string) string {
	t.Helper()
	token, _, err := s.Tokens().Issue(ca.TokenRequest{Identity: ca.Identity{Namespace: ns, ServiceAccount: sa}, Pod: pod, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// foreignToken is a well-formed token for the identity signed by another
// pilot's key: what a forger who knows the format but not the key makes.
func foreignToken(t *testing.T, ns, sa string) string {
	t.Helper()
	other, err := ca.OpenTokenIssuer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := other.Issue(ca.TokenRequest{Identity: ca.Identity{Namespace: ns, ServiceAccount: sa}})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// The attack: a plaintext ADS client names namespace victim in its node
// metadata and asks SDS for default. Off Kubernetes it used to get
// victim's certificate and private key; it gets an empty answer, counted
// as a refusal.
func TestPlaintextClientClaimingAnIdentityGetsNoKey(t *testing.T) {
	s, addr := discoverytest.Start(t, nil)
	c := dialNode(t, addr, "sidecar~10.0.0.66~victim-1.victim~victim.svc.cluster.local", "victim", "default", nil)
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default", "ROOTCA"}})
	if r := c.recv(); r.TypeUrl != snapshot.SecretType || len(r.Resources) != 0 {
		t.Fatalf("SDS for default: a %s response with %d resources, want an empty SDS answer", r.TypeUrl, len(r.Resources))
	}
	if got := counter(t, s, "pilot_sds_refused", ""); got != 1 {
		t.Errorf("pilot_sds_refused = %v, want 1", got)
	}
}

// --insecure-trust-claimed-identity restores serving the claimed
// identity's certificate, for simulated fleets.
func TestInsecureTrustClaimedIdentityServesClaimedSDS(t *testing.T) {
	opts := discoverytest.Options(t)
	opts.InsecureTrustClaimedIdentity = true
	s, addr := discoverytest.StartWith(t, opts, nil)
	c := dialNode(t, addr, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "cart", map[string]string{"app": "cart"})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default"}})
	if got := secretIdentity(t, c.recv()); got != "spiffe://cluster.local/ns/shop/sa/cart" {
		t.Errorf("the certificate is for %q, want the claimed identity", got)
	}
	if got := counter(t, s, "pilot_sds_refused", ""); got != 0 {
		t.Errorf("pilot_sds_refused = %v, want 0", got)
	}
}

// A stream whose token proves the identity its metadata claims is served
// its own secrets.
func TestAuthenticatedStreamGetsItsOwnSecret(t *testing.T) {
	s, addr := discoverytest.Start(t, nil)
	ctx := withToken(context.Background(), issueToken(t, s, "shop", "cart", "cart-1", ""))
	c := dialNodeWith(t, ctx, addr, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "cart", map[string]string{"app": "cart"})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default"}})
	if got := secretIdentity(t, c.recv()); got != "spiffe://cluster.local/ns/shop/sa/cart" {
		t.Errorf("the certificate is for %q, want the token's identity", got)
	}
	// A proxy that names only its namespace, as ztunnel does, is the
	// token's service account.
	bare := dialNodeWith(t, ctx, addr, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "", nil)
	bare.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.SecretType, ResourceNames: []string{"default"}})
	if got := secretIdentity(t, bare.recv()); got != "spiffe://cluster.local/ns/shop/sa/cart" {
		t.Errorf("without a claimed service account the certificate is for %q, want the token's identity", got)
	}
}

// An authenticated proxy registers only as its own identity and pod; a
// token that does not verify refuses the stream.
func TestStreamWhoseTokenAndMetadataDisagreeIsRefused(t *testing.T) {
	s, addr := discoverytest.Start(t, nil)
	cart := issueToken(t, s, "shop", "cart", "cart-1", "")
	for _, c := range []struct {
		name, token, id, ns, sa string
		want                    codes.Code
		wantText                string
	}{
		{"another namespace", cart, "sidecar~10.0.0.7~victim-1.victim~victim.svc.cluster.local", "victim", "cart",
			codes.PermissionDenied, `claims namespace "victim" and service account "cart", but its token is for shop/cart`},
		{"another service account", cart, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "payments",
			codes.PermissionDenied, "its token is for shop/cart"},
		{"another pod", cart, "sidecar~10.0.0.7~cart-2.shop~shop.svc.cluster.local", "shop", "cart",
			codes.PermissionDenied, `claims pod "cart-2", but its token is bound to pod "cart-1"`},
		{"forged", foreignToken(t, "shop", "cart"), "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "cart",
			codes.Unauthenticated, "the token is not valid"},
		{"not a token", "hello", "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", "shop", "cart",
			codes.Unauthenticated, "the token is not valid"},
	} {
		stream := dialNodeWith(t, withToken(context.Background(), c.token), addr, c.id, c.ns, c.sa, nil)
		stream.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
		err := stream.streamEnd()
		if status.Code(err) != c.want || !strings.Contains(status.Convert(err).Message(), c.wantText) {
			t.Errorf("%s: the stream ended with %v, want %v with %q", c.name, err, c.want, c.wantText)
		}
	}
	if n := len(s.Connections()); n != 0 {
		t.Errorf("%d refused streams are still connected", n)
	}
}

// The certificate API off Kubernetes: a caller proves who it is with a
// token, gets only its own identity, and a node proxy impersonates only
// the pods of its own node.
func TestCertificateAPIRefusesWhatTheCallerMayNotHave(t *testing.T) {
	s, _ := discoverytest.Start(t, nil)
	_, cc := serveTLS(t, s)
	client := pb.NewIstioCertificateServiceClient(cc)
	discoverytest.ApplyYAML(t, s, shopPodsOnNodes)
	const cartID, paymentsID = "spiffe://cluster.local/ns/shop/sa/cart", "spiffe://cluster.local/ns/shop/sa/payments"
	cartToken := issueToken(t, s, "shop", "cart", "cart-1", "")
	node1 := issueToken(t, s, "istio-system", "ztunnel", "ztunnel-node-1", "node-1")
	_, cartCSR := newCSR(t, cartID)
	_, paymentsCSR := newCSR(t, paymentsID)
	_, nodeCSR := newCSR(t, "")
	for _, c := range []struct {
		name     string
		token    string
		req      *pb.IstioCertificateRequest
		want     codes.Code
		wantText string
	}{
		{"no token", "", &pb.IstioCertificateRequest{Csr: cartCSR}, codes.Unauthenticated, "want one authorization header"},
		{"forged token", foreignToken(t, "shop", "cart"), &pb.IstioCertificateRequest{Csr: cartCSR}, codes.Unauthenticated, "the token is not valid"},
		{"another identity's CSR", cartToken, &pb.IstioCertificateRequest{Csr: paymentsCSR}, codes.PermissionDenied,
			"shop/cart may not ask for the identity of shop/payments"},
		{"impersonation by a workload", cartToken, &pb.IstioCertificateRequest{Csr: nodeCSR, Metadata: impersonate(paymentsID)},
			codes.PermissionDenied, "shop/cart is not a node proxy's service account"},
		{"a pod on another node", node1, &pb.IstioCertificateRequest{Csr: nodeCSR, Metadata: impersonate(paymentsID)},
			codes.PermissionDenied, "node proxy istio-system/ztunnel on node node-1 may not ask for shop/payments"},
		{"its own identity", cartToken, &pb.IstioCertificateRequest{Csr: cartCSR}, codes.OK, ""},
		{"a pod on its node", node1, &pb.IstioCertificateRequest{Csr: nodeCSR, Metadata: impersonate(cartID)}, codes.OK, ""},
	} {
		ctx := context.Background()
		if c.token != "" {
			ctx = withToken(ctx, c.token)
		}
		_, err := client.CreateCertificate(ctx, c.req)
		if status.Code(err) != c.want || !strings.Contains(status.Convert(err).Message(), c.wantText) {
			t.Errorf("%s: got %v, want %v with %q", c.name, err, c.want, c.wantText)
		}
	}
}

// With --insecure-trust-claimed-identity the certificate API is what it
// was: no caller authenticated, impersonation honoured.
func TestInsecureTrustClaimedIdentityCertificateAPI(t *testing.T) {
	opts := discoverytest.Options(t)
	opts.InsecureTrustClaimedIdentity = true
	s, _ := discoverytest.StartWith(t, opts, nil)
	_, cc := serveTLS(t, s)
	_, csr := newCSR(t, "")
	resp, err := pb.NewIstioCertificateServiceClient(cc).CreateCertificate(context.Background(),
		&pb.IstioCertificateRequest{Csr: csr, Metadata: impersonate("spiffe://cluster.local/ns/shop/sa/cart")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetCertChain()) != 2 {
		t.Errorf("%d certificates, want leaf and root", len(resp.GetCertChain()))
	}
}

// The token key is kept in the CA's directory: a restarted control plane
// verifies the tokens it issued before.
func TestTokensOutliveARestart(t *testing.T) {
	opts := discoverytest.Options(t)
	first, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	token := issueToken(t, first, "shop", "cart", "", "")
	_ = first.Close()
	opts.StorePath = filepath.Join(t.TempDir(), "config.db")
	second, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if caller, err := second.Tokens().Verify(token); err != nil || caller.Identity != (ca.Identity{Namespace: "shop", ServiceAccount: "cart"}) {
		t.Errorf("after a restart: %+v, %v", caller, err)
	}
}
