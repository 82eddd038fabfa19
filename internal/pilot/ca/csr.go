package ca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxWorkloadCertTTL is istiod's MAX_WORKLOAD_CERT_TTL: the longest lifetime
// a CSR may ask for.
const MaxWorkloadCertTTL = 90 * 24 * time.Hour

// ErrInvalidRequest marks a signing request refused for what it asked
// (a bad CSR, a foreign or malformed identity, a lifetime too long), as
// opposed to a failure of the CA itself.
var ErrInvalidRequest = errors.New("invalid certificate request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// SignCSR signs a certificate signing request (from ParseCSR, which checked
// its signature) for id, with the key the CSR carries (the caller keeps its
// private key), for ttl (zero: the CA's workload TTL,
// DEFAULT_WORKLOAD_CERT_TTL). The CSR's subject and SANs are not copied: the
// certificate names id only.
func (ca *CA) SignCSR(csr *x509.CertificateRequest, id Identity, ttl time.Duration) (*Signed, error) {
	switch {
	case ttl == 0:
		ttl = ca.set.workloadTTL
	case ttl < 0:
		return nil, invalid("requested lifetime %v is negative", ttl)
	case ttl > MaxWorkloadCertTTL:
		return nil, invalid("requested lifetime %v is more than the maximum %v (MAX_WORKLOAD_CERT_TTL)", ttl, MaxWorkloadCertTTL)
	}
	return ca.sign(id, csr.PublicKey, ttl, nil)
}

// ParseCSR decodes a PEM CSR and checks its signature (proof that the caller
// holds the key).
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, invalid("the CSR is not a PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, invalid("the CSR does not parse: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, invalid("the CSR's signature does not verify: %v", err)
	}
	return csr, nil
}

// ParseSPIFFEID reads spiffe://TRUST_DOMAIN/ns/NS/sa/SA, refusing another
// trust domain than the CA's and any other form.
func (ca *CA) ParseSPIFFEID(s string) (Identity, error) {
	rest, ok := strings.CutPrefix(s, "spiffe://")
	if !ok {
		return Identity{}, invalid("identity %q is not a SPIFFE ID (spiffe://%s/ns/NAMESPACE/sa/SERVICE_ACCOUNT)", s, ca.trustDomain)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 || parts[1] != "ns" || parts[3] != "sa" {
		return Identity{}, invalid("identity %q is not of the form spiffe://%s/ns/NAMESPACE/sa/SERVICE_ACCOUNT", s, ca.trustDomain)
	}
	if parts[0] != ca.trustDomain {
		return Identity{}, invalid("identity %q is in trust domain %q, not this CA's %q", s, parts[0], ca.trustDomain)
	}
	id, err := NewIdentity(parts[2], parts[4])
	if err != nil {
		return Identity{}, invalid("identity %q: %v", s, err)
	}
	return id, nil
}
