package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// Trusting claimed identities hands out keys to whoever asks: pilot
// refuses it, in one line and before creating anything, when a listener
// is reachable from other hosts.
func TestPilotRefusesInsecureTrustOffLoopback(t *testing.T) {
	dataDir := t.TempDir()
	var stderr syncBuffer
	// Bounded, so that a pilot which took the flag stops and fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := runPilot(ctx, []string{"--dataDir", dataDir, "--insecure-trust-claimed-identity",
		"--grpcAddr", "0.0.0.0:0", "--httpAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0"}, &syncBuffer{}, &stderr)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if code != exitBadInput || len(lines) != 1 || !strings.Contains(lines[0], "refused with --grpcAddr 0.0.0.0:0 off loopback") {
		t.Errorf("exit %d, stderr %q; want exit 2 and one line naming --grpcAddr", code, stderr.String())
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Errorf("the refused pilot left %d entries in its data directory", len(entries))
	}
}

// On loopback the flag is taken, with one warning line.
func TestPilotInsecureTrustOnLoopbackWarns(t *testing.T) {
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int)
	readyFile := filepath.Join(dataDir, "ready")
	go func() {
		done <- runPilot(ctx, []string{"--dataDir", dataDir, "--insecure-trust-claimed-identity", "--ready-file", readyFile,
			"--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0"}, &syncBuffer{}, &stderr)
	}()
	waitReadyFile(t, readyFile)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "--insecure-trust-claimed-identity"); n != 1 {
		t.Errorf("%d lines name the flag, want one warning: %s", n, stderr.String())
	}
}

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
