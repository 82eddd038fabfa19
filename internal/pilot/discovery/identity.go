package discovery

import (
	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// openIdentity sets up who proves identities: the token issuer off
// Kubernetes, whose key lives beside the CA's root.
func (s *Server) openIdentity() error {
	if s.opts.Kube != nil {
		return nil
	}
	tokens, err := ca.OpenTokenIssuer(s.opts.CADir)
	if err != nil {
		return err
	}
	s.tokens = tokens
	return nil
}

// Tokens issues and verifies the pods' tokens off Kubernetes; nil on
// Kubernetes, where the kubelet projects them.
func (s *Server) Tokens() *ca.TokenIssuer { return s.tokens }
