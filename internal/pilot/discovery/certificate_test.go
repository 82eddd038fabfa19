package discovery_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
)

// newCSR makes a P-256 key and a PEM CSR for it naming uri (none if empty),
// as ztunnel's certificate client does.
func newCSR(t *testing.T, uri string) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// The certificate API on the TLS port, called as a node proxy calls it
// with its token:
// for a pod's identity through ImpersonatedIdentity, for the CSR's own SAN,
// and refused (InvalidArgument, one clear message) for a broken CSR, a
// foreign trust domain, a malformed identity or a lifetime over the maximum.
func TestCreateCertificateOverTLS(t *testing.T) {
	s, plainAddr := discoverytest.Start(t, nil)
	_, cc := serveTLS(t, s)
	client := pb.NewIstioCertificateServiceClient(cc)
	discoverytest.ApplyYAML(t, s, shopPodsOnNodes)
	ctx := withToken(context.Background(), issueToken(t, s, "istio-system", "ztunnel", "ztunnel-node-1", "node-1"))

	// The plaintext port does not sign: nothing authenticates its callers.
	plain, err := grpc.NewClient(plainAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, anyCSR := newCSR(t, "spiffe://cluster.local/ns/shop/sa/cart")
	if _, err := pb.NewIstioCertificateServiceClient(plain).CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: anyCSR}); status.Code(err) != codes.Unimplemented {
		t.Errorf("the plaintext port answered CreateCertificate: %v", err)
	}

	key, csr := newCSR(t, "spiffe://cluster.local/ns/istio-system/sa/ztunnel")
	resp, err := client.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 3600,
		Metadata: impersonate("spiffe://cluster.local/ns/shop/sa/cart")})
	if err != nil {
		t.Fatal(err)
	}
	chain := resp.GetCertChain()
	if len(chain) != 2 || chain[1] != string(s.RootPEM()) {
		t.Fatalf("want [leaf, root], got %d certificates", len(chain))
	}
	if err := ca.VerifyWorkload(s.RootPEM(), []byte(chain[0]), "spiffe://cluster.local/ns/shop/sa/cart", time.Now()); err != nil {
		t.Error(err)
	}
	block, _ := pem.Decode([]byte(chain[0]))
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(leaf.PublicKey) {
		t.Error("the certificate is not for the CSR's key")
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life != time.Hour+ca.ClockSkewGrace {
		t.Errorf("lifetime %v, want the hour asked for (plus the backdating)", life)
	}

	// No impersonation: the CSR's SAN, with the default lifetime.
	resp, err = client.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csr})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.VerifyWorkload(s.RootPEM(), []byte(resp.GetCertChain()[0]), "spiffe://cluster.local/ns/istio-system/sa/ztunnel", time.Now()); err != nil {
		t.Error(err)
	}

	_, noSAN := newCSR(t, "")
	tampered := strings.Replace(csr, csr[100:110], "AAAAAAAAAA", 1)
	for _, c := range []struct {
		name     string
		ctx      context.Context
		req      *pb.IstioCertificateRequest
		wantText string
	}{
		{"not PEM", ctx, &pb.IstioCertificateRequest{Csr: "hello"}, "the CSR is not a PEM CERTIFICATE REQUEST block"},
		{"tampered", ctx, &pb.IstioCertificateRequest{Csr: tampered}, "the CSR"},
		{"no SAN, no impersonation", ctx, &pb.IstioCertificateRequest{Csr: noSAN}, "the CSR has 0 URI SANs and no ImpersonatedIdentity metadata names the identity"},
		{"foreign trust domain",
			ctx,
			&pb.IstioCertificateRequest{Csr: csr, Metadata: impersonate("spiffe://other.example/ns/shop/sa/cart")}, `identity "spiffe://other.example/ns/shop/sa/cart" is in trust domain "other.example", not this CA's "cluster.local"`},
		{"malformed identity",
			ctx,
			&pb.IstioCertificateRequest{Csr: csr, Metadata: impersonate("spiffe://cluster.local/shop/cart")}, `identity "spiffe://cluster.local/shop/cart" is not of the form spiffe://cluster.local/ns/NAMESPACE/sa/SERVICE_ACCOUNT`},
		{"too long", ctx, &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 91 * 24 * 3600}, "requested lifetime 7862400s is more than the maximum 2160h0m0s (MAX_WORKLOAD_CERT_TTL)"},
	} {
		_, err := client.CreateCertificate(c.ctx, c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.wantText) {
			t.Errorf("%s: got %v, want InvalidArgument with %q", c.name, err, c.wantText)
		}
		if msg := status.Convert(err).Message(); strings.Contains(msg, "\n") {
			t.Errorf("%s: message spans lines: %q", c.name, msg)
		}
	}
}

// impersonate is a request's metadata naming the identity a node proxy asks
// for on a pod's behalf, as ztunnel sends it.
func impersonate(id string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{ca.ImpersonatedIdentityKey: structpb.NewStringValue(id)}}
}
