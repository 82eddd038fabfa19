package discovery_test

import (
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
)

// issueToken is a token from s for the identity, bound to pod and node
// when they are not empty.
func issueToken(t *testing.T, s *discovery.Server, ns, sa, pod, node string) string {
	t.Helper()
	token, _, err := s.Tokens().Issue(ca.TokenRequest{Identity: ca.Identity{Namespace: ns, ServiceAccount: sa}, Pod: pod, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// The token key is kept in the CA's directory: a restarted control plane
// verifies the tokens it issued before.
func TestTokensOutliveARestart(t *testing.T) {
	opts := discoverytest.Options(t)
	first, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	token := issueToken(t, first, "shop", "cart", "", "")
	_ = first.Close()
	opts.StorePath = filepath.Join(t.TempDir(), "config.db")
	second, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if caller, err := second.Tokens().Verify(token); err != nil || caller.Identity != (ca.Identity{Namespace: "shop", ServiceAccount: "cart"}) {
		t.Errorf("after a restart: %+v, %v", caller, err)
	}
}
