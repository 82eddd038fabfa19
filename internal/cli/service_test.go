package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// startService runs meshperf service with args (on a free loopback port
// unless they give -port) until the test ends and returns the address its
// ready file gives.
func startService(t *testing.T, args ...string) string {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "service.ready")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stdout, stderr syncBuffer
	if !slices.Contains(args, "-port") {
		args = append(args, "-port", "127.0.0.1:0")
	}
	go func() {
		done <- runService(ctx, append(args, "-ready-file", readyFile), &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("meshperf service %v exited %d: %s", args, code, stderr.String())
		}
		if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
			t.Error("the ready file outlived the service")
		}
	})
	return waitReadyFile(t, readyFile).Listeners[listenerHTTP]
}

// Two services of one graph, the caller finding the callee through a
// hosts file, as in the lab; the graph and the name come from isotope's
// variables.
func TestServiceCallsThroughTheHostsFile(t *testing.T) {
	dir := t.TempDir()
	leaf := startService(t, "-topology", "chain-5", "-name", "chain-4")
	_, port, _ := net.SplitHostPort(leaf)
	graph := filepath.Join(dir, "pair.yaml")
	writeFiles(t, dir, map[string]string{"pair.yaml": fmt.Sprintf(`services:
- name: front
  isEntrypoint: true
  responseSize: 77
  script:
  - call: {service: back, hostname: "back.test:%s", size: 10}
- name: back
`, port), "hosts": "127.0.0.1 back.test\n"})
	hostsFile := filepath.Join(dir, "hosts")
	t.Setenv(serviceTopologyEnv, graph)
	t.Setenv(serviceNameEnv, "front")
	front := startService(t, "-hosts", hostsFile)

	resp, err := http.Get("http://" + front + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 77 {
		t.Fatalf("front answered %d with %d bytes (%q), want 200 with 77", resp.StatusCode, len(body), body)
	}
	// The leaf counted the call: the hosts file sent it there.
	resp, err = http.Get("http://" + leaf + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "service_incoming_requests_total 1\n") {
		t.Errorf("the leaf did not count one request:\n%s", metrics)
	}
}

// A bare port, isotope's form, listens on every interface.
func TestServiceBarePortListensOnEveryInterface(t *testing.T) {
	addr := startService(t, "-topology", "chain-5", "-name", "chain-4", "-port", "0")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsUnspecified() {
		t.Fatalf("ready file says %q, want the unspecified address", addr)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
}

func TestServiceBadInput(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.yaml": "services:\n- name: a\n  script:\n  - call: nowhere\n",
		"hosts":    "not-an-address a\n",
	})
	bad, badHosts := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "hosts")
	t.Setenv(serviceTopologyEnv, "")
	t.Setenv(serviceNameEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-topology", "chain-5"}, "-name"},
		{[]string{"-topology", "chain-5", "-name", "nope"}, `no service "nope"`},
		{[]string{"-topology", "no-such-graph", "-name", "a"}, "no-such-graph"},
		{[]string{"-topology", filepath.Join(dir, "missing.yaml"), "-name", "a"}, "missing.yaml"},
		{[]string{"-topology", bad, "-name", "a"}, "nowhere"},
		{[]string{"-name", "a"}, "/etc/config/service-graph.yaml"},
		{[]string{"-topology", "chain-5", "-name", "chain-0", "-hosts", badHosts}, "not-an-address"},
		{[]string{"-topology", "chain-5", "-name", "chain-0", "-port", "eighty"}, "-port"},
		{[]string{"-topology", "chain-5", "-name", "chain-0", "-port", ""}, "-port"},
		{[]string{"-no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, "extra"},
	} {
		var stdout, stderr syncBuffer
		code := runService(context.Background(), c.args, &stdout, &stderr)
		if code != exitBadInput || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q", c.args, code, stderr.String(), c.want)
		}
		if stdout.String() != "" {
			t.Errorf("%v: started anyway: %q", c.args, stdout.String())
		}
	}
}

func TestServicePortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stdout, stderr syncBuffer
	code := runService(context.Background(), []string{"-topology", "chain-5", "-name", "chain-0", "-port", busy.Addr().String()}, &stdout, &stderr)
	if code != exitFailed || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), busy.Addr().String()) {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming the address", code, stderr.String())
	}
}
