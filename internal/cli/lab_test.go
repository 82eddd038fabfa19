package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabRunBadInputIsOneLineExit2(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badFile, []byte("name: bad\nconnections: [4, 0]\nqps: [100]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "nosuch"}, `no shipped scenario "nosuch"`},
		{[]string{"run", badFile}, "connections[1]"},
		{[]string{"run", "-conn", "4,x"}, "-conn"},
		{[]string{"run", "-conn", "0"}, "flag -conn"},
		{[]string{"run", "-protocol", "udp"}, "-protocol"},
		{[]string{"run", "-modes", "sidecar"}, "-modes"},
		{[]string{"run", "-network", "bridge"}, "-network"},
		{[]string{"run", "-proxy", filepath.Join(dir, "none")}, "-proxy"},
		{[]string{"run", "quick", "latency"}, "one scenario at a time"},
		{[]string{"frobnicate"}, `meshperf lab: unknown command "frobnicate"`},
	} {
		var stdout, stderr bytes.Buffer
		code := Lab(c.args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("lab %q: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, msg, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("lab %q: wrote to stdout: %q", c.args, stdout.String())
		}
	}
}

func TestLabList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Lab([]string{"list"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "quick (default): 4 runs, about 1m48s\n") {
		t.Errorf("list does not start with the default scenario and its estimate:\n%s", out)
	}
	for _, name := range []string{"latency:", "cpu-mem:", "istio-1.24:"} {
		if !strings.Contains(out, name) {
			t.Errorf("list lacks %s:\n%s", name, out)
		}
	}
}

func TestFindProxyOrder(t *testing.T) {
	dir := t.TempDir()
	meshperf := filepath.Join(dir, "meshperf")
	beside := filepath.Join(dir, "meshperf-proxy")
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findProxy("", meshperf); err != nil || got != beside {
		t.Errorf("beside meshperf: %q, %v; want %q", got, err, beside)
	}
	if got, err := findProxy(beside, "/nonexistent/meshperf"); err != nil || got != beside {
		t.Errorf("-proxy: %q, %v", got, err)
	}
}

// --prometheus without the prometheus server: one line with the install
// line, exit 2, before anything starts (no output directory is made).
func TestLabRunPrometheusMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir) // nothing on it; prometheus lives in /usr/bin
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := Lab([]string{"run", "-prometheus", "-network", "loopback", "-out", out}, &stdout, &stderr)
	msg := stderr.String()
	want := "meshperf lab run: --prometheus needs Debian's prometheus server: prometheus not found; install prometheus (apt-get install prometheus)\n"
	if code != 2 || msg != want {
		t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, msg, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output directory was made (%v): something started", err)
	}
}
