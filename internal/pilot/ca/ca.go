// Package ca is the control plane's built-in certificate authority, the
// counterpart of istiod's self-signed CA. It keeps one root key and
// certificate on disk and issues short-lived SPIFFE workload certificates
// (spiffe://<trust domain>/ns/<namespace>/sa/<service account>) that the xDS
// server hands to proxies over SDS as the `default` secret, next to the root
// as `ROOTCA`.
//
// Unlike istiod, the control plane mints a sidecar's workload key itself
// instead of signing a CSR from an agent: meshperf's proxy has no agent, and
// one key pair per identity (not per proxy) is what lets 2000 sidecars of one
// service account share a single certificate. Node proxies of the ambient
// mode do ask with a CSR, through istiod's certificate API
// (CertificateService); both paths sign through one function. Get caches that certificate and
// re-issues it at Istio's rotation point, half its lifetime by default
// (SECRET_GRACE_PERIOD_RATIO=0.5); RotateDue tells the control plane whose
// `default` secret must be pushed again.
//
// Workloads handed out by Issue and Get are shared and must not be modified.
package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"sync"
	"time"
)

// Names and defaults shared with Istio.
const (
	// WorkloadSecretName is the SDS name of a proxy's own certificate and key.
	WorkloadSecretName = "default"
	// RootSecretName is the SDS name of the trust anchor proxies validate peers with.
	RootSecretName = "ROOTCA"

	// RootCertFile and RootKeyFile are the file names of the root in Open's directory.
	RootCertFile = "root-cert.pem"
	RootKeyFile  = "root-key.pem"

	// DefaultWorkloadCertTTL is istiod's DEFAULT_WORKLOAD_CERT_TTL.
	DefaultWorkloadCertTTL = 24 * time.Hour
	// DefaultRootCertTTL is istiod's CITADEL_SELF_SIGNED_CA_CERT_TTL (ten years).
	DefaultRootCertTTL = 3650 * 24 * time.Hour
	// DefaultGracePeriodRatio is Istio's SECRET_GRACE_PERIOD_RATIO: the share of
	// a certificate's lifetime still left when it is rotated.
	DefaultGracePeriodRatio = 0.5
	// ClockSkewGrace backdates NotBefore so that a proxy whose clock is a little
	// behind the control plane's accepts a certificate issued this instant
	// (istiod's ClockSkewGracePeriod).
	ClockSkewGrace = 2 * time.Minute
)

// KeyAlgorithm is the kind of key generated for new roots and for workloads.
type KeyAlgorithm string

// Supported key algorithms. ECDSA P-256 is the default: it is what Istio uses
// with ECC_SIGNATURE_ALGORITHM=ECDSA, and key generation is ~1000x cheaper
// than RSA's, which matters when a whole mesh rotates at once.
const (
	ECDSAP256 KeyAlgorithm = "ECDSA-P256"
	ECDSAP384 KeyAlgorithm = "ECDSA-P384"
	RSA2048   KeyAlgorithm = "RSA-2048"
)

// Option changes one setting of Open.
type Option func(*settings)

type settings struct {
	workloadTTL time.Duration
	rootTTL     time.Duration
	graceRatio  float64
	now         func() time.Time
	alg         KeyAlgorithm
	log         *slog.Logger
}

// WithWorkloadCertTTL sets the lifetime of workload certificates
// (DEFAULT_WORKLOAD_CERT_TTL). It is capped at the root's own expiry.
func WithWorkloadCertTTL(d time.Duration) Option { return func(s *settings) { s.workloadTTL = d } }

// WithRootCertTTL sets the lifetime of a newly created root
// (CITADEL_SELF_SIGNED_CA_CERT_TTL); an existing root keeps its own.
func WithRootCertTTL(d time.Duration) Option { return func(s *settings) { s.rootTTL = d } }

// WithGracePeriodRatio sets SECRET_GRACE_PERIOD_RATIO, in [0, 1]: a cached
// certificate is re-issued once only this share of its lifetime is left.
func WithGracePeriodRatio(r float64) Option { return func(s *settings) { s.graceRatio = r } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithKeyAlgorithm sets the algorithm of workload keys and of a newly created
// root key. An existing root keeps its own key.
func WithKeyAlgorithm(a KeyAlgorithm) Option { return func(s *settings) { s.alg = a } }

// WithLogger sets where the CA reports root creation and failed rotations.
// The default discards.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

func (s *settings) validate() error {
	switch {
	case s.workloadTTL <= 0:
		return fmt.Errorf("workload certificate TTL must be positive, got %v", s.workloadTTL)
	case s.rootTTL <= 0:
		return fmt.Errorf("root certificate TTL must be positive, got %v", s.rootTTL)
	case !(s.graceRatio >= 0 && s.graceRatio <= 1): // also rejects NaN
		return fmt.Errorf("grace period ratio must be between 0 and 1, got %v", s.graceRatio)
	case s.now == nil:
		return errors.New("clock must not be nil")
	case s.log == nil:
		return errors.New("logger must not be nil")
	}
	switch s.alg {
	case ECDSAP256, ECDSAP384, RSA2048:
		return nil
	}
	return fmt.Errorf("unknown key algorithm %q (want %s, %s or %s)", s.alg, ECDSAP256, ECDSAP384, RSA2048)
}

// CA issues workload certificates signed by its root. It is safe for
// concurrent use.
type CA struct {
	trustDomain string
	set         settings
	root        *x509.Certificate
	rootKey     crypto.Signer
	rootPEM     []byte

	mu    sync.RWMutex
	slots map[Identity]*slot
}

// Open loads the root from dir, or creates dir (mode 0700) and a new root in
// it, and returns a CA for trustDomain (e.g. "cluster.local"). A root that
// cannot be read, does not parse, is not a CA, has expired or does not match
// its key is an error naming the file: Open never replaces it, since every
// proxy in the mesh trusts it.
func Open(dir, trustDomain string, opts ...Option) (*CA, error) {
	s := settings{
		workloadTTL: DefaultWorkloadCertTTL,
		rootTTL:     DefaultRootCertTTL,
		graceRatio:  DefaultGracePeriodRatio,
		now:         time.Now,
		alg:         ECDSAP256,
		log:         slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&s)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	if err := validateTrustDomain(trustDomain); err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	if dir == "" {
		return nil, errors.New("ca: no directory given for the root key and certificate")
	}
	r, err := openRoot(dir, trustDomain, &s)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	return &CA{
		trustDomain: trustDomain,
		set:         s,
		root:        r.cert,
		rootKey:     r.key,
		rootPEM:     r.certPEM,
		slots:       make(map[Identity]*slot),
	}, nil
}

// TrustDomain returns the trust domain of the SPIFFE IDs the CA issues.
func (ca *CA) TrustDomain() string { return ca.trustDomain }

// RootPEM returns the root certificate, PEM-encoded. The slice is a copy.
func (ca *CA) RootPEM() []byte { return append([]byte(nil), ca.rootPEM...) }

// Root returns the parsed root certificate; it must not be modified.
func (ca *CA) Root() *x509.Certificate { return ca.root }

// Workload is an issued certificate with its private key. It is immutable and
// shared by every caller that got it.
type Workload struct {
	Identity     Identity
	SPIFFEID     string
	CertChainPEM []byte    // the leaf; intermediates would follow it, the root is not included
	KeyPEM       []byte    // PKCS#8
	IssuedAt     time.Time // the CA's clock at issue; NotBefore is ClockSkewGrace earlier
	NotAfter     time.Time
	RotateAt     time.Time // when Get starts handing out a fresh certificate
}

// Issue returns a new key pair and certificate for the service account,
// bypassing the cache.
func (ca *CA) Issue(namespace, serviceAccount string) (*Workload, error) {
	id, err := NewIdentity(namespace, serviceAccount)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	return ca.issue(id)
}

// IssueServing issues a certificate for the control plane itself: the SPIFFE
// identity of namespace/serviceAccount (istiod's is istio-system/istiod) plus
// DNS names (or IP addresses), so that xDS clients can verify it by either,
// as they verify istiod on its TLS port.
func (ca *CA) IssueServing(namespace, serviceAccount string, dnsNames ...string) (*Workload, error) {
	id, err := NewIdentity(namespace, serviceAccount)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	return ca.issue(id, dnsNames...)
}

func (ca *CA) issue(id Identity, dnsNames ...string) (*Workload, error) {
	key, err := generateKey(ca.set.alg)
	if err != nil {
		return nil, fmt.Errorf("ca: issue %s: %w", id, err)
	}
	c, err := ca.sign(id, key.Public(), ca.set.workloadTTL, dnsNames)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("ca: issue %s: %w", id, err)
	}
	grace := time.Duration(ca.set.graceRatio * float64(c.NotAfter.Sub(c.IssuedAt)))
	return &Workload{
		Identity:     id,
		SPIFFEID:     c.SPIFFEID,
		CertChainPEM: c.CertPEM,
		KeyPEM:       keyPEM,
		IssuedAt:     c.IssuedAt,
		NotAfter:     c.NotAfter,
		RotateAt:     c.NotAfter.Add(-grace),
	}, nil
}

// Signed is a certificate the CA signed for a key it does not hold.
type Signed struct {
	SPIFFEID string
	CertPEM  []byte // the leaf
	Leaf     *x509.Certificate
	IssuedAt time.Time // the CA's clock at signing; NotBefore is ClockSkewGrace earlier
	NotAfter time.Time
}

// sign is the CA's one signing path: a workload certificate for id's SPIFFE
// ID (plus dnsNames) on pub, valid for ttl or until the root expires,
// whichever is first.
func (ca *CA) sign(id Identity, pub crypto.PublicKey, ttl time.Duration, dnsNames []string) (*Signed, error) {
	now := ca.set.now()
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("ca: issue %s: %w", id, err)
	}
	notAfter := now.Add(ttl)
	if notAfter.After(ca.root.NotAfter) {
		// A leaf outliving its root would fail verification before its NotAfter.
		notAfter = ca.root.NotAfter
	}
	spiffeID := id.SPIFFEID(ca.trustDomain)
	uri, err := url.Parse(spiffeID)
	if err != nil {
		return nil, fmt.Errorf("ca: issue %s: %w", id, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// An empty subject makes Go mark the SAN critical, as RFC 5280 requires
		// and SPIFFE X509-SVIDs do.
		NotBefore:             now.Add(-ClockSkewGrace),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{uri},
	}
	// A name that is an address goes where TLS clients verify addresses: a
	// webhook the API server calls at https://127.0.0.1:PORT, say.
	for _, n := range dnsNames {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.root, pub, ca.rootKey)
	if err != nil {
		return nil, fmt.Errorf("ca: sign certificate for %s: %w", id, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parse certificate issued for %s: %w", id, err)
	}
	return &Signed{
		SPIFFEID: spiffeID,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Leaf:     leaf,
		IssuedAt: now,
		NotAfter: notAfter,
	}, nil
}

// rootTemplate describes a self-signed root the way istiod's looks (subject
// O=<trust domain>, CertSign, no SAN), named so an operator can tell whose it is.
func rootTemplate(trustDomain string, now time.Time, ttl time.Duration) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{trustDomain},
			CommonName:   "meshperf root CA",
		},
		// Backdated like workload certificates, or a proxy with a slow clock
		// would reject a root created moments ago.
		NotBefore:             now.Add(-ClockSkewGrace),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil
}

func generateKey(alg KeyAlgorithm) (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case ECDSAP384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case RSA2048:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", alg, err)
	}
	return k, nil
}

// newSerial returns a random 128-bit serial number, as RFC 5280 recommends
// (at least 64 bits of entropy) and istiod uses.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}
