package ca

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Any string presented as a token is refused as ErrUnauthenticated in one
// line, never a panic; one that does verify (a valid token, or one whose
// base64 differs only in bits the decoder ignores) names exactly whom the
// issuer signed it for. `go test ./internal/pilot/ca -fuzz FuzzVerifyToken`.
func FuzzVerifyToken(f *testing.F) {
	tokens, err := OpenTokenIssuer(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	valid, _, err := tokens.Issue(TokenRequest{Identity: cart, Pod: "cart-1", Node: "node-1", Lifetime: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	head, _, _ := strings.Cut(valid, ".")
	for _, s := range []string{valid, "", ".", "..", "a.b.c", head + "..", valid + "x", strings.ToUpper(valid),
		`eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.`, strings.Repeat("A", 5000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		caller, err := tokens.Verify(token)
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Verify(%q): %v; want one line wrapping ErrUnauthenticated", token, err)
			}
			return
		}
		if caller.Identity != cart || caller.Pod != "cart-1" || caller.Node != "node-1" {
			t.Fatalf("Verify(%q) = %+v, not whom the issuer signed for", token, caller)
		}
	})
}
