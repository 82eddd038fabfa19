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
var DefaultTrustedNodeAccounts = []Identity{{"istio-system", "ztunnel"}, {"kube-system", "ztunnel"}}

// Authenticator says who calls the certificate API.
type Authenticator interface {
	// Authenticate returns the caller's identity, or an error wrapping
	// ErrUnauthenticated.
	Authenticate(ctx context.Context) (Identity, error)
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
func (a *TokenReviewAuthenticator) Authenticate(ctx context.Context) (Identity, error) {
	token, err := bearerToken(ctx)
	if err != nil {
		return Identity{}, err
	}
	review, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{TokenAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		// Not the caller's fault: say so, so that an RBAC gap is not
		// mistaken for bad tokens.
		return Identity{}, fmt.Errorf("review the caller's token: %w", err)
	}
	st := review.Status
	switch {
	case !st.Authenticated:
		return Identity{}, fmt.Errorf("%w: the token is not valid: %s", ErrUnauthenticated, st.Error)
	case !slices.Contains(st.Audiences, TokenAudience):
		return Identity{}, fmt.Errorf("%w: the token is not for audience %s", ErrUnauthenticated, TokenAudience)
	}
	id, ok := serviceAccountOf(st.User.Username)
	if !ok {
		return Identity{}, fmt.Errorf("%w: %q is not a service account", ErrUnauthenticated, st.User.Username)
	}
	return id, nil
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
// node proxy's service account, the identity it impersonates.
func authorize(caller, want Identity, impersonating bool, nodeAccounts sets.Set[Identity]) error {
	if impersonating {
		if !nodeAccounts.Has(caller) {
			return fmt.Errorf("%w: %s is not a node proxy's service account and may not ask for %s", ErrPermissionDenied, caller, want)
		}
		return nil
	}
	if caller != want {
		return fmt.Errorf("%w: %s may not ask for the identity of %s", ErrPermissionDenied, caller, want)
	}
	return nil
}
