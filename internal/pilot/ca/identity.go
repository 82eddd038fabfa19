package ca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Identity is a workload identity: a Kubernetes service account.
type Identity struct {
	Namespace      string
	ServiceAccount string
}

// NewIdentity validates namespace (a DNS-1123 label, as Kubernetes requires of
// namespaces) and serviceAccount (a DNS-1123 subdomain, as Kubernetes requires
// of service account names), so that neither can bend the SPIFFE ID's path.
func NewIdentity(namespace, serviceAccount string) (Identity, error) {
	if len(validation.IsDNS1123Label(namespace)) != 0 {
		return Identity{}, fmt.Errorf("namespace %q is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)", namespace)
	}
	if len(validation.IsDNS1123Subdomain(serviceAccount)) != 0 {
		return Identity{}, fmt.Errorf("service account %q is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)", serviceAccount)
	}
	return Identity{Namespace: namespace, ServiceAccount: serviceAccount}, nil
}

// SPIFFEID returns the identity's SPIFFE ID in trustDomain, in Istio's form.
func (id Identity) SPIFFEID(trustDomain string) string {
	return "spiffe://" + trustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// String returns "namespace/serviceAccount", for logs and errors.
func (id Identity) String() string { return id.Namespace + "/" + id.ServiceAccount }

// validateTrustDomain applies the SPIFFE spec's character set for trust
// domains: lowercase letters, digits, '.', '-' and '_'.
func validateTrustDomain(td string) error {
	if td == "" {
		return errors.New("trust domain is empty (Istio's default is cluster.local)")
	}
	if len(td) > 255 {
		return fmt.Errorf("trust domain %q is longer than 255 characters", td)
	}
	for _, c := range td {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("trust domain %q has %q: only lowercase letters, digits, '.', '-' and '_' are allowed", td, c)
		}
	}
	return nil
}

// VerifyWorkload checks, at time now, that the first certificate of chainPEM
// chains to a certificate in rootPEM through the rest of chainPEM, that it is
// a leaf usable for both server and client TLS, and that its only URI SAN is
// wantSPIFFE. It is what a peer proxy checks, for tests of the CA and of the
// proxy.
func VerifyWorkload(rootPEM, chainPEM []byte, wantSPIFFE string, now time.Time) error {
	roots, err := parseCerts(rootPEM)
	if err != nil {
		return fmt.Errorf("verify workload: root: %w", err)
	}
	chain, err := parseCerts(chainPEM)
	if err != nil {
		return fmt.Errorf("verify workload: chain: %w", err)
	}
	rootPool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range roots {
		rootPool.AddCert(c)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if leaf.IsCA {
		return errors.New("verify workload: leaf certificate is a CA")
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		// One Verify per usage: Go accepts a chain if it allows any listed usage.
		opts := x509.VerifyOptions{Roots: rootPool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("verify workload %s: %w", leafName(leaf), err)
		}
	}
	if leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("verify workload %s: leaf lacks the digitalSignature key usage", leafName(leaf))
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantSPIFFE {
		return fmt.Errorf("verify workload: URI SANs are %v, want exactly %s", leafURIs(leaf), wantSPIFFE)
	}
	return nil
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block is %q, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

func leafURIs(c *x509.Certificate) []string {
	out := make([]string, 0, len(c.URIs))
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

func leafName(c *x509.Certificate) string {
	if len(c.URIs) > 0 {
		return c.URIs[0].String()
	}
	return "serial " + c.SerialNumber.String()
}
