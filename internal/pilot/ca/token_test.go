package ca

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/metadata"
)

func openTestIssuer(t *testing.T) (*TokenIssuer, string) {
	t.Helper()
	dir := t.TempDir()
	tokens, err := OpenTokenIssuer(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tokens, dir
}

var cart = Identity{Namespace: "shop", ServiceAccount: "cart"}

// A token names its service account, pod and node as a projected
// Kubernetes token does, and verifies back to the same caller.
func TestTokenRoundTrip(t *testing.T) {
	tokens, _ := openTestIssuer(t)
	token, exp, err := tokens.Issue(TokenRequest{Identity: cart, Pod: "cart-1", Node: "node-1", Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 59*time.Minute || d > time.Hour {
		t.Errorf("expires in %v, want an hour", d)
	}
	var claims podTokenClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Subject != "system:serviceaccount:shop:cart" || claims.Issuer != TokenIssuerName ||
		len(claims.Audience) != 1 || claims.Audience[0] != TokenAudience || claims.Kubernetes.Pod.Name != "cart-1" {
		t.Errorf("claims %+v", claims)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	caller, err := tokens.Authenticate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Caller{Identity: cart, Pod: "cart-1", Node: "node-1"}); caller != want {
		t.Errorf("caller %+v, want %+v", caller, want)
	}
}

// Every token the issuer did not sign as it signs, or whose time is over,
// is refused as unauthenticated.
func TestTokenVerifyRefuses(t *testing.T) {
	tokens, _ := openTestIssuer(t)
	other, _ := openTestIssuer(t)
	sign := func(issuer *TokenIssuer, edit func(*podTokenClaims), method jwt.SigningMethod) string {
		now := time.Now()
		c := podTokenClaims{
			RegisteredClaims: jwt.RegisteredClaims{Issuer: TokenIssuerName, Subject: "system:serviceaccount:shop:cart",
				Audience: jwt.ClaimStrings{TokenAudience}, IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
				ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
			Kubernetes: kubernetesClaim{Namespace: "shop", ServiceAccount: objectRef{"cart"}},
		}
		edit(&c)
		var key any = issuer.key
		if method == jwt.SigningMethodNone {
			key = jwt.UnsafeAllowNoneSignatureType
		}
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	same := func(*podTokenClaims) {}
	for _, c := range []struct {
		name, token, want string
	}{
		{"as signed", sign(tokens, same, jwt.SigningMethodES256), ""},
		{"another pilot's key", sign(other, same, jwt.SigningMethodES256), "signature is invalid"},
		{"unsigned", sign(tokens, same, jwt.SigningMethodNone), "signing method none is invalid"},
		{"expired", sign(tokens, func(c *podTokenClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute)) }, jwt.SigningMethodES256), "token is expired"},
		{"no expiry", sign(tokens, func(c *podTokenClaims) { c.ExpiresAt = nil }, jwt.SigningMethodES256), "exp claim is required"},
		{"not yet valid", sign(tokens, func(c *podTokenClaims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) }, jwt.SigningMethodES256), "token is not valid yet"},
		{"wrong audience", sign(tokens, func(c *podTokenClaims) { c.Audience = jwt.ClaimStrings{"kubernetes"} }, jwt.SigningMethodES256), "token has invalid audience"},
		{"wrong issuer", sign(tokens, func(c *podTokenClaims) { c.Issuer = "someone-else" }, jwt.SigningMethodES256), "token has invalid issuer"},
		{"subject not a service account", sign(tokens, func(c *podTokenClaims) { c.Subject = "admin" }, jwt.SigningMethodES256), "disagree"},
		{"subject and claim disagree", sign(tokens, func(c *podTokenClaims) { c.Kubernetes.Namespace = "victim" }, jwt.SigningMethodES256), "disagree"},
		{"garbage", "not.a.token", "token is malformed"},
	} {
		_, err := tokens.Verify(c.token)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want unauthenticated with %q", c.name, err, c.want)
		}
	}
}

// Bad requests get one clear line each.
func TestTokenRequestValidation(t *testing.T) {
	tokens, _ := openTestIssuer(t)
	for _, c := range []struct {
		req  TokenRequest
		want string
	}{
		{TokenRequest{Identity: Identity{"Bad_NS!", "cart"}}, `namespace "Bad_NS!" is not a DNS-1123 label`},
		{TokenRequest{Identity: Identity{"shop", ""}}, `service account "" is not a DNS-1123 subdomain`},
		{TokenRequest{Identity: cart, Pod: "a/b"}, `pod name "a/b" is not a DNS-1123 subdomain`},
		{TokenRequest{Identity: cart, Pod: "cart-1", Node: "Node 1"}, `node name "Node 1" is not a DNS-1123 subdomain`},
		{TokenRequest{Identity: cart, Node: "node-1"}, "without a pod"},
		{TokenRequest{Identity: cart, Lifetime: time.Minute}, "lifetime 1m0s is not between 10m0s and 24h0m0s"},
		{TokenRequest{Identity: cart, Lifetime: 25 * time.Hour}, "lifetime 25h0m0s is not between"},
	} {
		_, _, err := tokens.Issue(c.req)
		var bad *TokenRequestError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.req, err, c.want)
		}
	}
}

// The signing key is created once, 0600, and read back on the next start:
// the tokens issued before still verify.
func TestTokenKeyPersists(t *testing.T) {
	first, dir := openTestIssuer(t)
	token, _, err := first.Issue(TokenRequest{Identity: cart})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %v, want 0600", perm)
	}
	again, err := OpenTokenIssuer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Verify(token); err != nil {
		t.Errorf("a token from before the restart: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenKeyFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenTokenIssuer(dir); err == nil || !strings.Contains(err.Error(), "no PEM data") {
		t.Errorf("a corrupt key: %v", err)
	}
}
