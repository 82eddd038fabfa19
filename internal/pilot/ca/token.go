package ca

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshperf/meshperf/internal/atomicfile"
)

// Off Kubernetes nothing proves a workload's identity, so the pilot issues
// the proof itself: bearer tokens shaped like Kubernetes' projected
// service-account tokens (what istio-agent and ztunnel already send to a CA
// and on xDS), signed with a key only the pilot holds. A token stays valid
// across the pilot's restarts because the key is kept in its data directory.

// TokenKeyFile is the file name of the tokens' signing key in the CA's
// directory.
const TokenKeyFile = "token-signing-key.pem"

// TokenIssuerName is the tokens' iss claim: the pilot, as the API server's
// issuer names a cluster.
const TokenIssuerName = "meshperf-pilot"

// Token lifetimes. The default is the kubelet's for a projected token; the
// minimum is the TokenRequest API's, below which a token would expire
// before the proxy holding it next renews its certificate; the maximum
// keeps a leaked token from lasting longer than a workload certificate,
// and covers a day-long lab run without renewing.
const (
	DefaultTokenLifetime = time.Hour
	MinTokenLifetime     = 10 * time.Minute
	MaxTokenLifetime     = 24 * time.Hour
)

// tokenLeeway tolerates clocks of the issuer and a verifier a little apart;
// here they are one process, but a token's iat is a whole second.
const tokenLeeway = 5 * time.Second

// TokenRequest is what a token names: a service account and, when the token
// is bound to one, the pod holding it and its node.
type TokenRequest struct {
	Identity
	Pod      string        // "" for an unbound token
	Node     string        // "" when the pod's node is not named
	Lifetime time.Duration // 0: DefaultTokenLifetime
}

// Validate checks the request as the API server checks a TokenRequest's
// names: pod and node names are DNS-1123 subdomains, and the lifetime is in
// bounds. The identity is checked by NewIdentity.
func (r TokenRequest) Validate() error {
	invalid := func(format string, args ...any) error {
		return &TokenRequestError{reason: fmt.Sprintf(format, args...)}
	}
	if _, err := NewIdentity(r.Namespace, r.ServiceAccount); err != nil {
		return invalid("%v", err)
	}
	for _, n := range []struct{ what, name string }{{"pod", r.Pod}, {"node", r.Node}} {
		if n.name != "" && len(validation.IsDNS1123Subdomain(n.name)) != 0 {
			return invalid("%s name %q is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)", n.what, n.name)
		}
	}
	if r.Node != "" && r.Pod == "" {
		return invalid("node %q without a pod: a token names its node only when bound to a pod on it", r.Node)
	}
	if r.Lifetime != 0 && (r.Lifetime < MinTokenLifetime || r.Lifetime > MaxTokenLifetime) {
		return invalid("lifetime %v is not between %v and %v", r.Lifetime, MinTokenLifetime, MaxTokenLifetime)
	}
	return nil
}

// TokenRequestError is a token request refused for what it asked, as
// opposed to a failure of the issuer.
type TokenRequestError struct{ reason string }

func (e *TokenRequestError) Error() string { return "invalid token request: " + e.reason }

// BadRequest marks the error as the asker's, which the API answers 400.
func (e *TokenRequestError) BadRequest() {}

// TokenIssuer signs the pilot's pod tokens and, as an Authenticator,
// verifies them: signature, issuer, audience istio-ca, and time.
type TokenIssuer struct {
	key *ecdsa.PrivateKey
	now func() time.Time
}

// OpenTokenIssuer reads the signing key in dir, or creates it (0600,
// written atomically) on the first start.
func OpenTokenIssuer(dir string) (*TokenIssuer, error) {
	path := filepath.Join(dir, TokenKeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createTokenKey(dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the token signing key: %w", err)
	}
	key, err := parseKey(path, data)
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: an %T, want the ECDSA P-256 key the pilot writes; remove it to create a new one (tokens issued before stop verifying)", path, key)
	}
	return &TokenIssuer{key: ec, now: time.Now}, nil
}

func createTokenKey(dir, path string) (*TokenIssuer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the token key's directory: %w", err)
	}
	key, err := generateKey(ECDSAP256)
	if err != nil {
		return nil, fmt.Errorf("create the token signing key: %w", err)
	}
	data, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("write the token signing key: %w", err)
	}
	return &TokenIssuer{key: key.(*ecdsa.PrivateKey), now: time.Now}, nil
}

// podTokenClaims are a projected service-account token's claims.
type podTokenClaims struct {
	jwt.RegisteredClaims
	Kubernetes kubernetesClaim `json:"kubernetes.io"`
}

type kubernetesClaim struct {
	Namespace      string     `json:"namespace"`
	ServiceAccount objectRef  `json:"serviceaccount"`
	Pod            *objectRef `json:"pod,omitempty"`
	Node           *objectRef `json:"node,omitempty"`
}

type objectRef struct {
	Name string `json:"name"`
}

// Issue signs a token for r and returns it and when it expires.
func (t *TokenIssuer) Issue(r TokenRequest) (string, time.Time, error) {
	if err := r.Validate(); err != nil {
		return "", time.Time{}, err
	}
	if r.Lifetime == 0 {
		r.Lifetime = DefaultTokenLifetime
	}
	now := t.now().Truncate(time.Second)
	exp := now.Add(r.Lifetime)
	c := podTokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: TokenIssuerName, Subject: serviceAccountUser(r.Identity), Audience: jwt.ClaimStrings{TokenAudience},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
		},
		Kubernetes: kubernetesClaim{Namespace: r.Namespace, ServiceAccount: objectRef{r.ServiceAccount}},
	}
	if r.Pod != "" {
		c.Kubernetes.Pod = &objectRef{r.Pod}
	}
	if r.Node != "" {
		c.Kubernetes.Node = &objectRef{r.Node}
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(t.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign the token: %w", err)
	}
	return signed, exp, nil
}

// IssuePodToken is Issue for the API, which names the request's fields
// rather than this package's types (it cannot import this package).
func (t *TokenIssuer) IssuePodToken(namespace, serviceAccount, pod, node string, lifetime time.Duration) (string, time.Time, error) {
	return t.Issue(TokenRequest{Identity: Identity{Namespace: namespace, ServiceAccount: serviceAccount}, Pod: pod, Node: node, Lifetime: lifetime})
}

// serviceAccountUser is a service account's user name, a token's subject.
func serviceAccountUser(id Identity) string {
	return "system:serviceaccount:" + id.Namespace + ":" + id.ServiceAccount
}

// Authenticate implements Authenticator: the caller's bearer token,
// verified.
func (t *TokenIssuer) Authenticate(ctx context.Context) (Caller, error) {
	token, err := bearerToken(ctx)
	if err != nil {
		return Caller{}, err
	}
	return t.Verify(token)
}

// Verify checks a token this issuer signed and says whom it names.
func (t *TokenIssuer) Verify(token string) (Caller, error) {
	var c podTokenClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.key.Public(), nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}), jwt.WithIssuer(TokenIssuerName),
		jwt.WithAudience(TokenAudience), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway), jwt.WithTimeFunc(t.now))
	if err != nil {
		// The library's message says which check failed (signature,
		// expired, audience), which is what the holder needs to hear.
		return Caller{}, fmt.Errorf("%w: the token is not valid: %w", ErrUnauthenticated, err)
	}
	id, ok := serviceAccountOf(c.Subject)
	k := c.Kubernetes
	if !ok || k.Namespace != id.Namespace || k.ServiceAccount.Name != id.ServiceAccount {
		return Caller{}, fmt.Errorf("%w: the token's subject %q and its kubernetes.io claim disagree", ErrUnauthenticated, c.Subject)
	}
	caller := Caller{Identity: id}
	if k.Pod != nil {
		caller.Pod = k.Pod.Name
	}
	if k.Node != nil {
		caller.Node = k.Node.Name
	}
	return caller, nil
}
