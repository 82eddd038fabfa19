package discovery

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"time"
)

// istiod's identity, which the control plane's serving certificate carries.
const (
	controlPlaneNamespace      = "istio-system"
	controlPlaneServiceAccount = "istiod"
)

// DefaultServingNames are the names the TLS xDS certificate is valid for:
// istiod's service names, so proxies configured for istiod verify it, and
// localhost for the one-machine case.
var DefaultServingNames = []string{"istiod.istio-system.svc", "istiod.istio-system.svc.cluster.local", "localhost"}

// ServingTLS is the TLS configuration of the secure xDS port: a certificate
// from the built-in CA for istiod's identity and names, re-issued at half its
// life; client certificates, when given, must chain to the mesh root.
func (s *Server) ServingTLS(names ...string) (*tls.Config, error) {
	if len(names) == 0 {
		names = DefaultServingNames
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.ca.RootPEM()) {
		return nil, fmt.Errorf("the CA's root is not PEM")
	}
	var (
		mu       sync.Mutex
		cert     *tls.Certificate
		rotateAt time.Time
	)
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		if cert != nil && time.Now().Before(rotateAt) {
			return cert, nil
		}
		w, err := s.ca.IssueServing(controlPlaneNamespace, controlPlaneServiceAccount, names...)
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(w.CertChainPEM, w.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		cert, rotateAt = &c, w.RotateAt
		return cert, nil
	}
	if _, err := get(nil); err != nil { // fail at start, not at the first handshake
		return nil, err
	}
	return &tls.Config{
		GetCertificate: get,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      pool,
		MinVersion:     tls.VersionTLS12,
	}, nil
}

// RootPEM is the mesh root certificate, for clients of the secure xDS port.
func (s *Server) RootPEM() []byte { return s.ca.RootPEM() }
