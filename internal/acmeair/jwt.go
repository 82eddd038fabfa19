package acmeair

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The reference app's token: issued by auth with the login as subject and
// the group "user", sent back in a cookie named Bearer (its JMeter script
// keeps it in a cookie manager; a browser does the same), and checked by
// every user-facing call.
const (
	jwtCookie   = "Bearer"
	userCookie  = "loggedinuser"
	jwtIssuer   = "http://acmeair-ms"
	jwtGroup    = "user"
	jwtLifetime = time.Hour
)

// errNoToken is a user-facing call without a token.
var errNoToken = errors.New("no token: send Authorization: Bearer TOKEN or the Bearer cookie from /auth/login")

// claims are the token's claims: the registered ones and MicroProfile
// JWT's groups.
type claims struct {
	Groups []string `json:"groups"`
	jwt.RegisteredClaims
}

// signer issues and checks HS256 tokens with the key every service shares.
type signer struct {
	key []byte
}

// ReadJWTKey reads the shared HS256 key from a file; surrounding white
// space is not part of it.
func ReadJWTKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("JWT key: %w", err)
	}
	k := []byte(strings.TrimSpace(string(b)))
	if len(k) < 16 {
		return nil, fmt.Errorf("JWT key %s: %d bytes; want at least 16", path, len(k))
	}
	return k, nil
}

// issue returns a signed token for login.
func (s signer) issue(login string, now time.Time) (string, error) {
	c := claims{
		Groups: []string{jwtGroup},
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    jwtIssuer,
			Subject:   login,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
}

// subject checks the request's token (header first, then cookie) and
// returns its subject.
func (s signer) subject(r *http.Request) (string, error) {
	raw := ""
	if h := r.Header.Get("Authorization"); h != "" {
		var ok bool
		if raw, ok = strings.CutPrefix(h, "Bearer "); !ok {
			return "", errors.New("the Authorization header is not a Bearer token")
		}
	} else if c, err := r.Cookie(jwtCookie); err == nil {
		raw = c.Value
	}
	if raw == "" {
		return "", errNoToken
	}
	var c claims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(jwtIssuer), jwt.WithExpirationRequired())
	if err != nil {
		return "", err
	}
	for _, g := range c.Groups {
		if g == jwtGroup {
			return c.Subject, nil
		}
	}
	return "", errors.New("token not in group " + jwtGroup)
}
