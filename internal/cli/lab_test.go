package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/scenario"
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
	for _, name := range []string{"latency:", "cpu-mem:", "istio-1.24:", "sweep: 30 runs, about 5m30s"} {
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

// lab sweep's bad input: one line, exit 2, before anything starts (no
// output directory is made).
func TestLabSweepBadInputIsOneLineExit2(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-slo", "p99"}, "-slo"},
		{[]string{"-slo", "p99=fast"}, "-slo"},
		{[]string{"-rates", "2000:1000"}, "-rates"},
		{[]string{"-rates", "fast"}, "-rates"},
		{[]string{"-target-rps", "0"}, "-target-rps: must be at least 1, got 0"},
		{[]string{"-target-rps", "-5"}, "-target-rps: must be at least 1, got -5"},
		{[]string{"-refine", "9"}, "-refine: must be 0 to 5, got 9"},
		{[]string{"-conn", "4,8"}, "a sweep takes one connection count, got 2"},
		{[]string{"-qps", "100"}, "flag provided but not defined: -qps"},
		{[]string{"-repetitions", "0"}, "repetitions: must be 1 to 100, got 0"},
		{[]string{"quick"}, "scenario quick: its qps [1000] cannot be the sweep's ladder: a sweep needs at least 2 rates, got 1; give -rates"},
		{[]string{"acmeair"}, "app acmeair has no request rate to raise"},
		{[]string{"sweep", "quick"}, "one scenario at a time"},
	} {
		args := append([]string{"sweep", "-network", "loopback", "-modes", "no-mesh,both-sidecars", "-out", out}, c.args...)
		var stdout, stderr bytes.Buffer
		code := Lab(args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("lab %q: exit %d, stderr %q; want exit 2 and one line with %q", args, code, msg, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("lab %q: wrote to stdout: %q", args, stdout.String())
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("lab %q: the output directory was made (%v): something started", args, err)
		}
	}
}

// A scenario's qps list is the default ladder only when it climbs.
func TestSweepOptionsLadder(t *testing.T) {
	s := &scenario.Scenario{Name: "mine", Connections: []int{4}, QPS: []int{100, 400, 200}}
	if _, err := sweepOptions(s, labSweepFlags{}); err == nil || !strings.Contains(err.Error(), "must go up, got 200 after 400; give -rates") {
		t.Errorf("descending qps: %v", err)
	}
	s.QPS = []int{0, 100}
	if _, err := sweepOptions(s, labSweepFlags{}); err == nil || !strings.Contains(err.Error(), "above 0") {
		t.Errorf("qps 0: %v", err)
	}
	s.QPS = []int{100, 200, 400}
	target := 300
	opts, err := sweepOptions(s, labSweepFlags{refine: 3, target: &target})
	if err != nil || !slices.Equal(opts.Rates, s.QPS) || opts.Refine != 3 || opts.TargetRPS != 300 {
		t.Errorf("ascending qps: %+v, %v", opts, err)
	}
	opts, err = sweepOptions(s, labSweepFlags{rates: []int{50, 100}})
	if err != nil || !slices.Equal(opts.Rates, []int{50, 100}) {
		t.Errorf("-rates over the scenario's qps: %+v, %v", opts, err)
	}
}
