package discovery

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/store"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// A proxy's node metadata is a claim anyone who reaches the xDS port can
// make. What proves an identity is a credential: on Kubernetes the pod's
// service-account token, reviewed by the API server; off Kubernetes a
// token this control plane issued (ca.TokenIssuer). The certificate API
// and SDS give a workload's key only to a caller so proven, as istiod does,
// unless the operator turned that off for simulated fleets
// (Options.InsecureTrustClaimedIdentity).

// openIdentity sets up who proves identities: the token issuer off
// Kubernetes, whose key lives beside the CA's root.
func (s *Server) openIdentity() error {
	if s.opts.Kube != nil {
		if s.opts.InsecureTrustClaimedIdentity {
			return errors.New("--insecure-trust-claimed-identity is for a control plane off Kubernetes: on Kubernetes a workload proves its identity with its service-account token")
		}
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

// authenticator verifies callers' tokens: the API server's review on
// Kubernetes, the token issuer off it.
func (s *Server) authenticator() ca.Authenticator {
	if s.opts.CertificateAuth != nil {
		return s.opts.CertificateAuth
	}
	if s.tokens != nil {
		return s.tokens
	}
	return nil
}

// authenticateStream is the xDS server's Authenticate: a stream that sends
// a bearer token (istio-agent, ztunnel and meshperf-proxy with
// --auth-token do) is who the token says, or refused; one that sends none
// is served as a claim, with no secrets (refusesSDS).
func (s *Server) authenticateStream(ctx context.Context) (*ca.Caller, error) {
	auth := s.authenticator()
	if auth == nil || !ca.HasCredential(ctx) {
		return nil, nil
	}
	caller, err := auth.Authenticate(ctx)
	switch {
	case errors.Is(err, ca.ErrUnauthenticated):
		return nil, status.Errorf(codes.Unauthenticated, "xDS stream refused: %v", err)
	case err != nil:
		// The token could not be checked (the API server did not
		// answer): not the proxy's fault, and it should retry.
		return nil, status.Errorf(codes.Unavailable, "xDS stream refused: %v", err)
	}
	return &caller, nil
}

// checkCaller binds an authenticated stream to its identity: a proxy may
// register endpoints only of the identity its credential proves, and, when
// the credential is bound to a pod, only as that pod. A proxy that names no
// service account (ztunnel sends only its namespace) takes the token's, as
// istiod's identity check allows. On success the proxy is marked
// authenticated, which entitles it to its own secrets.
func checkCaller(c *xds.Connection) error {
	caller, p := c.Caller(), c.Proxy()
	if caller == nil {
		return nil
	}
	if p.ServiceAccount == "" && p.Namespace == caller.Namespace {
		p.ServiceAccount = caller.ServiceAccount
	}
	if p.Namespace != caller.Namespace || p.ServiceAccount != caller.ServiceAccount {
		return status.Errorf(codes.PermissionDenied,
			"xDS stream refused: proxy %s claims namespace %q and service account %q, but its token is for %s",
			p.ID, p.Namespace, p.ServiceAccount, caller.Identity)
	}
	if caller.Pod != "" && p.PodName != caller.Pod {
		return status.Errorf(codes.PermissionDenied,
			"xDS stream refused: proxy %s claims pod %q, but its token is bound to pod %q", p.ID, p.PodName, caller.Pod)
	}
	p.Authenticated = true
	return nil
}

// refusesSDS says whether SDS serves p no secret: a proxy whose identity
// is only a claim gets none (the certificate comes from the CA port, with
// a credential), unless the operator chose to trust claims.
func (s *Server) refusesSDS(p *model.Proxy) bool {
	return !s.opts.InsecureTrustClaimedIdentity && !p.Authenticated
}

// certificateServiceOptions are the certificate API's: callers
// authenticated by their tokens, node proxies limited to the pods of their
// node, unless the operator chose to trust claims.
func (s *Server) certificateServiceOptions() []ca.ServiceOption {
	if s.opts.InsecureTrustClaimedIdentity {
		return nil
	}
	auth := s.authenticator()
	if auth == nil {
		return nil
	}
	opts := []ca.ServiceOption{ca.WithAuthenticator(auth)}
	if s.opts.Kube != nil {
		// A node proxy gets the identities of the pods on its own node
		// only, as istiod's NodeAuthorizer allows.
		return append(opts, ca.WithNodeAuthorizer(s.opts.Kube))
	}
	return append(opts, ca.WithNodeAuthorizer(storeNodes{s.store}))
}

// storeNodes answers ca.NodeAuthorizer off Kubernetes from the
// WorkloadEntries that place pods on nodes: each ambient pod is one, named
// after the pod, labelled with its node (generate.NodeLabel) and carrying
// its service account.
type storeNodes struct{ store store.Reader }

// PodNode implements ca.NodeAuthorizer.
func (n storeNodes) PodNode(namespace, name string) (string, bool) {
	r, ok := n.store.Get(config.Key{Kind: config.KindWorkloadEntry, Namespace: namespace, Name: name})
	if !ok {
		return "", false
	}
	we, ok := r.Spec.(*networking.WorkloadEntry)
	if !ok || we.GetLabels()[generate.NodeLabel] == "" {
		return "", false
	}
	return we.GetLabels()[generate.NodeLabel], true
}

// ServiceAccountOnNode implements ca.NodeAuthorizer.
func (n storeNodes) ServiceAccountOnNode(node, namespace, serviceAccount string) bool {
	for _, r := range n.store.List(config.KindWorkloadEntry, namespace) {
		we, ok := r.Spec.(*networking.WorkloadEntry)
		if ok && we.GetServiceAccount() == serviceAccount && we.GetLabels()[generate.NodeLabel] == node {
			return true
		}
	}
	return false
}

var _ ca.NodeAuthorizer = storeNodes{}
