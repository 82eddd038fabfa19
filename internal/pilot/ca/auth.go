package ca

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
)

// TokenAudience is the audience of the service-account tokens the
// certificate API accepts: Istio's, projected into every injected pod.
const TokenAudience = "istio-ca"

// DefaultTrustedNodeAccounts are the service accounts of node proxies,
// which may ask for the identities of the pods they serve: istiod's
// CA_TRUSTED_NODE_ACCOUNTS default.
// meshperf's own node proxy (the DaemonSet meshperf-node of `meshperf
// pilot manifest`) runs as meshperf-system/meshperf-node-proxy.
var DefaultTrustedNodeAccounts = []Identity{
	{"istio-system", "ztunnel"}, {"kube-system", "ztunnel"}, {"meshperf-system", "meshperf-node-proxy"},
}

// Authenticator says who calls the certificate API.
type Authenticator interface {
	// Authenticate returns the caller, or an error wrapping
	// ErrUnauthenticated.
	Authenticate(ctx context.Context) (Caller, error)
}

// Caller is an authenticated caller of the certificate API: its service
// account and, when its token is bound to a pod, that pod and its node.
type Caller struct {
	Identity
	Pod  string // the bound pod's name, in the identity's namespace; "" if unbound
	Node string // the bound pod's node, as the token says; "" if it says none
}

// The extra fields of a pod-bound token's review that name its pod and,
// since Kubernetes 1.30 (ServiceAccountTokenPodNodeInfo), its node.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraNodeName = "authentication.kubernetes.io/node-name"
)

// NodeAuthorizer limits a node proxy to the identities of the pods on its
// own node, as istiod's NodeAuthorizer does: the Kubernetes source's pod
// informer answers both.
type NodeAuthorizer interface {
	// PodNode is the node a pod is scheduled to.
	PodNode(namespace, name string) (node string, ok bool)
	// ServiceAccountOnNode says whether a pod of the service account runs
	// on the node.
	ServiceAccountOnNode(node, namespace, serviceAccount string) bool
}

// ErrUnauthenticated is a caller without valid credentials.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrPermissionDenied is a caller asking for an identity it may not have.
var ErrPermissionDenied = errors.New("permission denied")

// TokenReviewAuthenticator authenticates a caller by the service-account
// token it sends as gRPC metadata `authorization: Bearer TOKEN` (what
// istio-agent and ztunnel send), reviewed by the API server for the
// audience istio-ca, as istiod's Kubernetes JWT authenticator does.
type TokenReviewAuthenticator struct {
	client kubernetes.Interface
}

// NewTokenReviewAuthenticator reviews tokens through client, which needs
// RBAC to create tokenreviews.
func NewTokenReviewAuthenticator(client kubernetes.Interface) *TokenReviewAuthenticator {
	return &TokenReviewAuthenticator{client: client}
}

// Authenticate implements Authenticator.
func (a *TokenReviewAuthenticator) Authenticate(ctx context.Context) (Caller, error) {
	token, err := bearerToken(ctx)
	if err != nil {
		return Caller{}, err
	}
	review, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{TokenAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		// Not the caller's fault: say so, so that an RBAC gap is not
		// mistaken for bad tokens.
		return Caller{}, fmt.Errorf("review the caller's token: %w", err)
	}
	st := review.Status
	switch {
	case !st.Authenticated:
		return Caller{}, fmt.Errorf("%w: the token is not valid: %s", ErrUnauthenticated, st.Error)
	case !slices.Contains(st.Audiences, TokenAudience):
		return Caller{}, fmt.Errorf("%w: the token is not for audience %s", ErrUnauthenticated, TokenAudience)
	}
	id, ok := serviceAccountOf(st.User.Username)
	if !ok {
		return Caller{}, fmt.Errorf("%w: %q is not a service account", ErrUnauthenticated, st.User.Username)
	}
	c := Caller{Identity: id}
	if v := st.User.Extra[extraPodName]; len(v) == 1 {
		c.Pod = v[0]
	}
	if v := st.User.Extra[extraNodeName]; len(v) == 1 {
		c.Node = v[0]
	}
	return c, nil
}

// HasCredential says whether a call carries an authorization header, which
// the caller then must make good: a stream without one is anonymous, one
// with a bad one is refused.
func HasCredential(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get("authorization")) > 0
}

func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return "", fmt.Errorf("%w: want one authorization header with a bearer token, got %d", ErrUnauthenticated, len(vals))
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", fmt.Errorf("%w: the authorization header is not a bearer token", ErrUnauthenticated)
	}
	return strings.TrimSpace(token), nil
}

// serviceAccountOf reads system:serviceaccount:NS:NAME.
func serviceAccountOf(username string) (Identity, bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return Identity{}, false
	}
	id, err := NewIdentity(parts[2], parts[3])
	return id, err == nil
}

// authorize says whether caller may get want: its own identity, or, for a
// node proxy's service account, the identity it impersonates; with nodes
// (on Kubernetes) only that of a pod running on the node proxy's own node.
func authorize(caller Caller, want Identity, impersonating bool, nodeAccounts sets.Set[Identity], nodes NodeAuthorizer) error {
	if !impersonating {
		if caller.Identity != want {
			return fmt.Errorf("%w: %s may not ask for the identity of %s", ErrPermissionDenied, caller.Identity, want)
		}
		return nil
	}
	if !nodeAccounts.Has(caller.Identity) {
		return fmt.Errorf("%w: %s is not a node proxy's service account and may not ask for %s", ErrPermissionDenied, caller.Identity, want)
	}
	if nodes == nil {
		return nil
	}
	node := caller.Node
	if node == "" && caller.Pod != "" {
		// An API server before 1.30, or with ServiceAccountTokenPodNodeInfo
		// off, names the pod only.
		node, _ = nodes.PodNode(caller.Namespace, caller.Pod)
	}
	if node == "" {
		return fmt.Errorf("%w: node proxy %s sent a token bound to no pod on a known node (want its pod's projected istio-ca token), so it may not ask for %s", ErrPermissionDenied, caller.Identity, want)
	}
	if !nodes.ServiceAccountOnNode(node, want.Namespace, want.ServiceAccount) {
		return fmt.Errorf("%w: node proxy %s on node %s may not ask for %s: no pod of that service account runs on its node", ErrPermissionDenied, caller.Identity, node, want)
	}
	return nil
}
