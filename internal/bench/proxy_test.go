package bench

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/history"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/syscmd"
	"github.com/meshperf/meshperf/internal/testenv"
)

// TestBenchProxy runs `meshperf bench proxy` for real, briefly: one round
// of 2 s runs, one hop and mTLS over HTTP/1.1, at 1000 qps and at the
// maximum rate. Every run is stored with its subject's mode, data plane,
// proxies in their roles and counters that a proxy doing the work would
// show; history follows meshperf-proxy's CPU by its mode.
func TestBenchProxy(t *testing.T) {
	haproxy := testenv.NeedCommand(t, "haproxy", "haproxy")
	meshperf := testenv.MeshperfWithProxy(t, "../..")
	perf := false
	if _, err := syscmd.Find("perf", "linux-perf"); err == nil && os.Geteuid() == 0 {
		perf = true
	}
	dir := t.TempDir()
	db, report := filepath.Join(dir, "results.db"), filepath.Join(dir, "report.json")
	cmd := exec.Command(meshperf, "bench", "proxy", "-repeats", "2", "-duration", "1s", "-warmup", "300ms", "-qps", "1000,0",
		"-cases", "plaintext,mtls", "-protocols", "http1", "-haproxy", haproxy, "-db", db, "-json", report,
		"-out", filepath.Join(dir, "out"), "-update", filepath.Join(dir, "proxy.baseline.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench proxy: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"both with 2 worker threads (--concurrency 2, nbthread 2): equal footing",
		"plaintext one hop, HTTP/1.1, 1000 qps, 4 connections, 1 kB (2 runs, medians)",
		"mTLS between two proxies, HTTP/1.1, max rate", "ratio ours/haproxy: vCPU/1k rps", "(goal <= 0.90x: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	store, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs, err := store.Runs(results.Filter{Scenario: ProxyScenario})
	if err != nil {
		t.Fatal(err)
	}
	// Two cases, two rates, three subjects, two rounds (-update needs two).
	if len(runs) != 24 {
		t.Fatalf("%d runs stored, want 24", len(runs))
	}
	wantRoles := map[string][]string{
		results.ModeNoMesh:    nil,
		"meshperf-proxy":      {results.RoleServerSidecar},
		"haproxy":             {results.RoleServerSidecar},
		"meshperf-proxy-mtls": {results.RoleServerSidecar, results.RoleClientSidecar},
		"haproxy-mtls":        {results.RoleServerSidecar, results.RoleClientSidecar},
	}
	for _, r := range runs {
		want, ok := wantRoles[r.Mode]
		if !ok {
			t.Errorf("run %s: mode %q", r.Label, r.Mode)
			continue
		}
		if r.Protocol != "http" || r.Connections != 4 || r.PayloadSize != 1024 || r.Calls == 0 || r.Failed {
			t.Errorf("run %s: protocol %s, %d connections, %d B, %d calls, failed %v", r.Label, r.Protocol, r.Connections, r.PayloadSize, r.Calls, r.Failed)
		}
		if r.MTLS != strings.HasSuffix(r.Mode, "-mtls") {
			t.Errorf("run %s: MTLS %v", r.Label, r.MTLS)
		}
		dp := r.Provenance.DataPlane
		switch {
		case r.Mode == results.ModeNoMesh && dp.Name != "",
			strings.HasPrefix(r.Mode, "meshperf-proxy") && (dp.Name != results.ComponentProxy || dp.Version == ""),
			strings.HasPrefix(r.Mode, "haproxy") && (dp.Name != "haproxy" || !strings.HasPrefix(dp.Version, "2.")):
			t.Errorf("run %s: data plane %+v", r.Label, dp)
		}
		var roles []string
		for _, p := range r.Processes {
			if !p.Sidecar() {
				continue
			}
			roles = append(roles, p.Role)
			checkCounters(t, r, p, perf)
		}
		if strings.Join(roles, ",") != strings.Join(want, ",") {
			t.Errorf("run %s: proxies %v, want %v", r.Label, roles, want)
		}
	}

	// history follows a subject by its mode, against the no-proxy runs.
	metric, err := history.LookupMetric("vcpu")
	if err != nil {
		t.Fatal(err)
	}
	s, err := history.Build(runs, history.Query{Scenario: ProxyScenario, Metric: metric, Mode: "meshperf-proxy", QPS: 1000, Connections: -1, Local: results.LocalMachine()})
	if err != nil || len(s.Points) != 1 || s.Points[0].Runs != 2 || !(s.Points[0].Value > 0) {
		t.Errorf("history of meshperf-proxy's vcpu: %+v, %v", s.Points, err)
	}
	sum := results.Summarize(runs)
	for _, p := range sum.Points {
		for _, m := range p.Modes {
			if m.Mode != results.ModeNoMesh && math.IsNaN(m.AddedP90) {
				t.Errorf("summary: %s at %d qps has no added latency against no-mesh", m.Mode, p.QPS)
			}
		}
	}
	if b, err := ReadBaseline(filepath.Join(dir, "proxy.baseline.json")); err != nil || b.Ratios["plaintext http 1000qps vcpu-per-1k"].Value <= 0 {
		t.Errorf("baseline: %+v, %v", b, err)
	}
	if data, err := os.ReadFile(report); err != nil || !strings.Contains(string(data), `"key": "mtls http max rps"`) {
		t.Errorf("-json report: %v\n%.400s", err, data)
	}
}

// checkCounters holds a proxy's counters to what it must have done: CPU
// split into user and system adding up to its total, syscalls (with perf)
// more than one per request, as a proxy reads and writes each, context
// switches counted.
func checkCounters(t *testing.T, r results.Run, p results.Process, perf bool) {
	t.Helper()
	c := p.Counters
	if c == nil {
		t.Errorf("run %s %s: no counters", r.Label, p.Role)
		return
	}
	if !(p.VCPU > 0) || math.Abs(c.UserVCPU+c.SystemVCPU-p.VCPU) > 0.01 || !(p.RSSMB > 1) {
		t.Errorf("run %s %s: vCPU %v = user %v + system %v? RSS %v MB", r.Label, p.Role, p.VCPU, c.UserVCPU, c.SystemVCPU, p.RSSMB)
	}
	if perf && !(c.SyscallsPerRequest > 1 && c.SyscallsPerRequest < 1000) {
		t.Errorf("run %s %s: %v syscalls per request", r.Label, p.Role, c.SyscallsPerRequest)
	}
	if !perf && !math.IsNaN(c.SyscallsPerRequest) {
		t.Errorf("run %s %s: syscalls %v without perf", r.Label, p.Role, c.SyscallsPerRequest)
	}
	if !(c.VoluntarySwitchesPerRequest >= 0 && c.InvoluntarySwitchesPerRequest >= 0) {
		t.Errorf("run %s %s: switches per request %v/%v", r.Label, p.Role, c.VoluntarySwitchesPerRequest, c.InvoluntarySwitchesPerRequest)
	}
	if strings.HasPrefix(r.Mode, "haproxy") && !math.IsNaN(c.AllocationsPerRequest) {
		t.Errorf("run %s %s: HAProxy with allocations %v", r.Label, p.Role, c.AllocationsPerRequest)
	}
	if !math.IsNaN(c.AllocationsPerRequest) && !(c.AllocationsPerRequest > 0) {
		t.Errorf("run %s %s: %v allocations per request", r.Label, p.Role, c.AllocationsPerRequest)
	}
}

// A -haproxy that is not there is one line naming it and the install
// line, exit 2, before anything starts.
func TestBenchProxyMissingHAProxy(t *testing.T) {
	meshperf := testenv.MeshperfWithProxy(t, "../..")
	missing := filepath.Join(t.TempDir(), "haproxy")
	cmd := exec.Command(meshperf, "bench", "proxy", "-haproxy", missing, "-db", filepath.Join(t.TempDir(), "r.db"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	want := "meshperf bench proxy: -haproxy " + missing + ": no such file: get it with `apt-get install haproxy`, or give its path with -haproxy\n"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("exit %v, stderr %q, stdout %q; want exit 2 and %q", err, stderr.String(), stdout.String(), want)
	}
}
