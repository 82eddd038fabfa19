package lab

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
)

// TestAdminClientPassesTheProxyAdminGuard runs the real meshperf-proxy and
// talks to its admin as the lab does: the admin refuses a POST that does
// not declare Content-Type: application/json (what a web page's form could
// send), and a read whose Host is not an IP address or localhost; the lab's
// client must pass both rules, writes and reads.
func TestAdminClientPassesTheProxyAdminGuard(t *testing.T) {
	proxyBin := testenv.ProxyBinary(t, repoRoot)
	p, err := proc.Start(proc.Spec{
		Name: "meshperf-proxy",
		Path: proxyBin,
		// No control plane: the admin answers all the same.
		Args:    []string{"--xds-address", "127.0.0.1:1", "--admin-address", "127.0.0.1:0", "--capture-mode", "none"},
		LogPath: filepath.Join(t.TempDir(), "proxy.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, err := p.WaitListening(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 {
		t.Fatalf("the proxy listens on %v, want its admin alone", addrs)
	}
	a := newAdminAt(addrs[0], nil)

	if err := a.setAccessLog(ctx, true); err != nil {
		t.Fatalf("the lab's POST to the admin: %v", err)
	}
	if _, err := a.configDump(ctx); err != nil {
		t.Fatalf("the lab's read of the admin: %v", err)
	}
	if _, err := a.metrics(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatalf("the proxy exited: %s", p.ExitReason())
	}
}
