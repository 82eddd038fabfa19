package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// A token issued through the API verifies as the pod it names, expires
// when the answer says, and is sent as JSON.
func TestClientIssueToken(t *testing.T) {
	tokens, err := ca.OpenTokenIssuer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var contentType string
	h := NewHandler(Deps{Store: newDB(t), Tokens: tokens})
	srv := newServer(t, Deps{})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		contentType = r.Header.Get("Content-Type")
		h.ServeHTTP(w, r)
	})
	c := newClient(t, srv)
	ctx := context.Background()
	resp, err := c.IssueToken(ctx, TokenRequest{Namespace: "shop", ServiceAccount: "cart", Pod: "cart-1", Node: "node-1", ExpirationSeconds: 7200})
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "application/json" {
		t.Errorf("sent as %q, want application/json", contentType)
	}
	if d := time.Until(resp.ExpirationTimestamp); d < 119*time.Minute || d > 2*time.Hour {
		t.Errorf("expires in %v, want two hours", d)
	}
	caller, err := tokens.Verify(resp.Token)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ca.Caller{Identity: ca.Identity{Namespace: "shop", ServiceAccount: "cart"}, Pod: "cart-1", Node: "node-1"}); caller != want {
		t.Errorf("the token names %+v, want %+v", caller, want)
	}

	for _, bad := range []struct {
		req  TokenRequest
		want string
	}{
		{TokenRequest{Namespace: "Bad_NS!", ServiceAccount: "cart"}, `namespace "Bad_NS!" is not a DNS-1123 label`},
		{TokenRequest{Namespace: "shop", ServiceAccount: "cart", ExpirationSeconds: 60}, "lifetime 1m0s is not between 10m0s and 24h0m0s"},
		{TokenRequest{Namespace: "shop", ServiceAccount: "cart", ExpirationSeconds: 90000}, "lifetime 25h0m0s is not between 10m0s and 24h0m0s"},
		{TokenRequest{Namespace: "shop", ServiceAccount: "cart", ExpirationSeconds: 1 << 62}, "expirationSeconds 4611686018427387904 is not a lifetime in seconds"},
	} {
		_, err := c.IssueToken(ctx, bad.req)
		if code, msg := statusOf(t, err); code != http.StatusBadRequest || !strings.Contains(msg, bad.want) {
			t.Errorf("%+v: %d %q, want 400 with %q", bad.req, code, msg, bad.want)
		}
	}

	// On Kubernetes the kubelet projects tokens: the endpoint says so.
	_, err = newClient(t, newServer(t, Deps{Store: newDB(t)})).IssueToken(ctx, TokenRequest{Namespace: "shop", ServiceAccount: "cart"})
	if code, msg := statusOf(t, err); code != http.StatusConflict || !strings.Contains(msg, "kubelet") {
		t.Errorf("without an issuer: %d %q, want 409", code, msg)
	}
}
