// Package pki issues the certificates of a Kubernetes cluster's
// components: a self-signed authority, client certificates whose common
// name and organizations the API server reads as user and groups, serving
// certificates, and the service-account token signing key. The local
// cluster (internal/kube/cluster) and the tests' API server
// (internal/kube/kubetest) both use it. The mesh's own workload CA is a
// different thing: internal/pilot/ca.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Authority is a certificate authority; every certificate it issues lasts
// as long as it does.
type Authority struct {
	cert     *x509.Certificate
	key      crypto.Signer
	validity time.Duration
	// CertPEM is its certificate, what clients trust.
	CertPEM []byte
}

// NewAuthority makes a self-signed CA valid from an hour before now (for
// clocks a little behind) for validity.
func NewAuthority(commonName string, now time.Time, validity time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, validity: validity, CertPEM: PEM("CERTIFICATE", der)}, nil
}

// KeyPEM is the authority's private key (PKCS #8), for a component that
// signs with it (the controller manager's certificate signer).
func (a *Authority) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, err
	}
	return PEM("PRIVATE KEY", der), nil
}

// CertSpec is one certificate to issue. Kubernetes reads a client's user
// name from the common name and its groups from the organizations.
type CertSpec struct {
	CommonName string
	Groups     []string
	DNSNames   []string
	IPs        []net.IP
	Client     bool
	Server     bool
}

// KeyPair is a certificate and its private key, PEM-encoded.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// Issue signs a new key's certificate for spec.
func (a *Authority) Issue(spec CertSpec, now time.Time) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Groups},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(a.validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		DNSNames:    spec.DNSNames,
		IPAddresses: spec.IPs,
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certificate for %s: %w", spec.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: PEM("CERTIFICATE", der), KeyPEM: PEM("EC PRIVATE KEY", keyDER)}, nil
}

// ServiceAccountKeys makes the key pair the API server signs and checks
// service-account tokens with. RSA: every consumer of the cluster's OIDC
// discovery document accepts it.
func ServiceAccountKeys() (keyPEM, publicPEM []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return PEM("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), PEM("PUBLIC KEY", pub), nil
}

// PEM encodes der as one PEM block of type typ.
func PEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux (it would have to be
		// unreadable); a fixed serial is still a valid certificate.
		return big.NewInt(1)
	}
	return n
}
