package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// meshperf pilot token writes a token (0600) that pilot's CA verifies as
// the pod it names; bad names are a usage error before any call.
func TestPilotTokenCommand(t *testing.T) {
	dataDir := t.TempDir()
	readyFile := filepath.Join(dataDir, "ready")
	r, stop := startPilot(t, "--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--ready-file", readyFile)
	defer stop()
	out := filepath.Join(t.TempDir(), "istio-token")
	var stdout, stderr syncBuffer
	code := runPilotToken(context.Background(), pilotEnv{}, []string{"--server", "http://" + r.Listeners["http"],
		"-n", "shop", "--service-account", "cart", "--pod", "cart-1", "--duration", "2h", "-o", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	token, _ := os.ReadFile(out)
	tokens, err := ca.OpenTokenIssuer(filepath.Join(dataDir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	caller, err := tokens.Verify(string(token))
	if want := (ca.Caller{Identity: ca.Identity{Namespace: "shop", ServiceAccount: "cart"}, Pod: "cart-1"}); err != nil || caller != want {
		t.Errorf("the token verifies as %+v (%v), want %+v", caller, err, want)
	}

	for _, args := range [][]string{
		{"-n", "Bad_NS!"},
		{"--node", "node-1"},
		{"--duration", "48h"},
	} {
		var stderr syncBuffer
		code := runPilotToken(context.Background(), pilotEnv{}, append([]string{"--server", "http://127.0.0.1:1"}, args...), &syncBuffer{}, &stderr)
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || len(lines) != 1 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line", args, code, stderr.String())
		}
	}
}
