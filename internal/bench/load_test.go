package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/syscmd"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// wrk's output as wrk 4.1 prints it with --latency (testdata), and with
// the error lines it adds when sockets fail or answers are not 2xx/3xx.
func TestParseWrk(t *testing.T) {
	data, err := os.ReadFile("testdata/wrk-latency.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseWrk(string(data))
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	l := r.Latency
	if r.Calls != 24080 || r.ActualQPS != 11367.65 || r.Duration != 2120*time.Millisecond || r.Errors != 0 ||
		!near(l.Avg, 1.44) || !near(l.Max, 45.17) || !near(l.P50, 0.228) || !near(l.P75, 0.799) || !near(l.P90, 3.25) ||
		!near(l.P99, 24.26) || !math.IsNaN(l.P999) || r.Corrected {
		t.Errorf("parsed %+v", r)
	}
	withErrors := strings.Replace(string(data), "Requests/sec:",
		"  Socket errors: connect 1, read 2, write 0, timeout 3\n  Non-2xx or 3xx responses: 40\nRequests/sec:", 1)
	if r, err := parseWrk(withErrors); err != nil || r.Errors != 46 || !near(r.ErrorPercent, 100*46.0/24080) {
		t.Errorf("with errors: %+v, %v", r.Errors, err)
	}
	if _, err := parseWrk(strings.Replace(string(data), "  Latency Distribution", "", 1)[:200]); err == nil {
		t.Error("output without its totals parsed")
	}
	noDistribution := string(data[:strings.Index(string(data), "  Latency Distribution")]) + "  24080 requests in 2.12s, 26.23MB read\nRequests/sec:  11367.65\n"
	if _, err := parseWrk(noDistribution); err == nil || !strings.Contains(err.Error(), "--latency") {
		t.Errorf("without --latency: %v", err)
	}
}

func TestParsePerfCount(t *testing.T) {
	out := "# started on Fri Nov 27 22:18:37 2026\n\n14064,,raw_syscalls:sys_enter,252544122,100.00,,\n"
	if n, err := parsePerfCount(out, SyscallEvent); err != nil || n != 14064 {
		t.Errorf("count %v, %v", n, err)
	}
	if _, err := parsePerfCount("<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n", SyscallEvent); err == nil || !strings.Contains(err.Error(), "not counted") {
		t.Error("<not counted> read as a count")
	}
	if _, err := parsePerfCount("", SyscallEvent); err == nil {
		t.Error("no line read as a count")
	}
}

// fortioForTest is the Fortio the test set-up built (MESHPERF_FORTIO_BIN,
// else bin/tools/fortio), "" when there is none: the benchmark then runs
// without it, as it does for a user.
func fortioForTest() string {
	for _, p := range []string{os.Getenv(testenv.FortioEnv), "../../bin/tools/fortio"} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			if _, err := LookPeer(FortioPeer, abs); err == nil {
				return abs
			}
		}
	}
	return ""
}

// The benchmark end to end, briefly: meshperf load, wrk and (when built)
// Fortio against a real echo server, each run stored with its processes
// and plausible counters, the ratios keyed as baselines keep them.
func TestRunLoad(t *testing.T) {
	wrk := testenv.NeedCommand(t, "wrk", "wrk")
	dir := t.TempDir()
	o := LoadOptions{Meshperf: testutil.MeshperfBinary(t), Wrk: wrk, Fortio: fortioForTest(), Rates: []int{500, 0},
		Connections: 2, Duration: time.Second, Repeats: 1, ResponseSize: 1024, Dir: dir, RunID: "abc123"}
	if perf, err := syscmd.Find("perf", "linux-perf"); err == nil && os.Geteuid() == 0 {
		o.Perf = perf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunLoad(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{GeneratorMeshperf: 2, GeneratorWrk: 1}
	if o.Fortio != "" {
		want[GeneratorFortio] = 2
	} else {
		t.Log("Fortio not built (bash scripts/setup test): the benchmark ran without it")
	}
	st, err := results.Open(filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range rep.Runs() {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := st.Runs(results.Filter{RunID: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range stored {
		got[r.Mode]++
		checkStoredLoadRun(t, r, o)
	}
	if len(got) != len(want) || got[GeneratorMeshperf] != want[GeneratorMeshperf] || got[GeneratorWrk] != want[GeneratorWrk] ||
		got[GeneratorFortio] != want[GeneratorFortio] {
		t.Errorf("stored runs by generator %v, want %v", got, want)
	}
	keys := map[string]bool{}
	for _, r := range rep.Ratios {
		keys[r.Key] = !math.IsNaN(r.Value)
	}
	if !keys["http1 max rate vs wrk"] || !keys["http1 max cpu-per-request vs wrk"] {
		t.Errorf("ratios %v: want ours/wrk flat out", keys)
	}
	if o.Fortio != "" && !keys["http1 500qps cpu-per-request vs fortio"] {
		t.Errorf("ratios %v: want ours/fortio at 500qps", keys)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"500 qps", "maximum rate (-qps 0)", "CPU per request (µs)", "ours/wrk rate: ", "not corrected", "wrk runs only flat out"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
}

// checkStoredLoadRun holds a run read back from the store to what the
// benchmark measured: its case, its generator and the server as
// processes, and counters a real run has.
func checkStoredLoadRun(t *testing.T, r results.Run, o LoadOptions) {
	t.Helper()
	name := r.Mode + " " + caseName(r.RequestedQPS)
	if r.Scenario != LoadScenario || r.Protocol != "http" || r.Connections != 2 || r.PayloadSize != 1024 ||
		r.Calls == 0 || r.Errors != 0 || r.StartTime.IsZero() || r.Provenance.Meshperf.Version == "" {
		t.Errorf("%s: stored %+v", name, r)
	}
	if r.RequestedQPS == 500 && math.Abs(r.ActualQPS-500) > 50 {
		t.Errorf("%s: %.0f rps at 500 asked", name, r.ActualQPS)
	}
	if want := r.Mode == GeneratorMeshperf && r.RequestedQPS > 0; r.Corrected != want {
		t.Errorf("%s: corrected %v, want %v", name, r.Corrected, want)
	}
	if !(r.Latency.P50 > 0 && r.Latency.P50 <= r.Latency.P99) {
		t.Errorf("%s: latency %+v", name, r.Latency)
	}
	gen, okGen := r.Process(results.RoleClientApp)
	srv, okSrv := r.Process(results.RoleServerApp)
	if !okGen || !okSrv || gen.Counters == nil || srv.Counters == nil {
		t.Fatalf("%s: processes %+v", name, r.Processes)
	}
	c := gen.Counters
	cpuPerRequest := gen.VCPU * r.Duration.Seconds() / float64(r.Calls)
	if !(gen.VCPU > 0 && c.UserVCPU > 0 && c.SystemVCPU > 0 && math.Abs(c.UserVCPU+c.SystemVCPU-gen.VCPU) < 1e-9) ||
		!(cpuPerRequest > 1e-7 && cpuPerRequest < 1e-2) || !(gen.MaxRSSMB > 1) {
		t.Errorf("%s: generator %+v, counters %+v", name, gen, *c)
	}
	// Each call blocks at least once a while on the server's answer; a
	// generator does not switch a hundred times per call.
	if !(c.VoluntarySwitchesPerRequest > 0 && c.VoluntarySwitchesPerRequest < 100) || !math.IsNaN(c.AllocationsPerRequest) {
		t.Errorf("%s: switches or allocations %+v", name, *c)
	}
	if o.Perf != "" && !(c.SyscallsPerRequest >= 1 && c.SyscallsPerRequest < 100) {
		t.Errorf("%s: %v syscalls per request: each call writes and reads at least once", name, c.SyscallsPerRequest)
	}
	if !(srv.VCPU > 0 && srv.Counters.UserVCPU+srv.Counters.SystemVCPU > 0) {
		t.Errorf("%s: server %+v", name, srv)
	}
}

// A generator that does not start fails the run, saying which.
func TestRunLoadFailsOnABrokenGenerator(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "fortio")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho cannot load >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := LoadOptions{Meshperf: testutil.MeshperfBinary(t), Fortio: broken, Rates: []int{100},
		Connections: 1, Duration: 200 * time.Millisecond, Repeats: 1, ResponseSize: 10, Dir: dir}
	_, err := RunLoad(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "fortio") || !strings.Contains(err.Error(), "cannot load") {
		t.Errorf("err %v; want fortio's exit and last line", err)
	}
}
