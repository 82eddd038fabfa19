package ca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestSDSSecrets(t *testing.T) {
	ca := mustOpen(t, t.TempDir())
	w, err := ca.Get("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}

	// Round-trip through Any, the way the xDS server sends it.
	def := roundTrip(t, w.SDSSecret())
	if def.GetName() != "default" {
		t.Errorf("workload secret name = %q, want default", def.GetName())
	}
	tc := def.GetTlsCertificate()
	chain := tc.GetCertificateChain().GetInlineBytes()
	key := tc.GetPrivateKey().GetInlineBytes()
	if _, err := tls.X509KeyPair(chain, key); err != nil {
		t.Errorf("default secret holds no usable key pair: %v", err)
	}
	if err := VerifyWorkload(ca.RootPEM(), chain, w.SPIFFEID, w.IssuedAt); err != nil {
		t.Errorf("default secret chain: %v", err)
	}

	root := roundTrip(t, ca.RootSecret())
	if root.GetName() != "ROOTCA" {
		t.Errorf("root secret name = %q, want ROOTCA", root.GetName())
	}
	trusted := root.GetValidationContext().GetTrustedCa().GetInlineBytes()
	block, _ := pem.Decode(trusted)
	if block == nil {
		t.Fatal("ROOTCA trusted_ca is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(ca.Root()) {
		t.Error("ROOTCA holds a different certificate than the root")
	}

	// The secret's bytes are the caller's: changing them must not reach the CA.
	s := ca.RootSecret()
	s.GetValidationContext().GetTrustedCa().GetInlineBytes()[0] ^= 0xff
	if !bytes.Equal(trusted, ca.RootPEM()) {
		t.Error("mutating a ROOTCA secret changed the CA's root")
	}
}

func roundTrip(t *testing.T, s *tlsv3.Secret) *tlsv3.Secret {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("secret %q fails Envoy's validation: %v", s.GetName(), err)
	}
	a, err := anypb.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"; a.GetTypeUrl() != want {
		t.Errorf("type URL = %s, want %s", a.GetTypeUrl(), want)
	}
	out := &tlsv3.Secret{}
	if err := a.UnmarshalTo(out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(out, s) {
		t.Error("secret changed in a marshal round trip")
	}
	return out
}
