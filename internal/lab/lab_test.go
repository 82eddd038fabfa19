package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// repoRoot is the module root, from this package's directory.
const repoRoot = "../.."

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaries returns meshperf (MESHPERF_BIN, or built once for the package's
// tests) and meshperf-proxy (MESHPERF_PROXY_BIN, or a Cargo build), or
// skips when the proxy has not been built.
func binaries(t *testing.T) (meshperf, proxy string) {
	t.Helper()
	proxy = proxyBinary()
	if proxy == "" {
		testenv.Missing(t, "meshperf-proxy", "run `cd proxy && cargo build --release` or set MESHPERF_PROXY_BIN")
	}
	if b := os.Getenv("MESHPERF_BIN"); b != "" {
		return b, proxy
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "meshperf-lab-test-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "meshperf")
		out, err := exec.Command("go", "build", "-o", builtBin, "../../cmd/meshperf").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build meshperf: %v", buildErr)
	}
	return builtBin, proxy
}

// proxyBinary is MESHPERF_PROXY_BIN or the Cargo build's meshperf-proxy,
// "" when there is none.
func proxyBinary() string {
	if p := os.Getenv("MESHPERF_PROXY_BIN"); p != "" {
		return p
	}
	for _, p := range []string{"proxy/target/release/meshperf-proxy", "proxy/target/debug/meshperf-proxy"} {
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err == nil {
			abs, _ := filepath.Abs(filepath.Join(repoRoot, p))
			return abs
		}
	}
	return ""
}

// testNetwork is the pods' network for a lab test: network namespaces with
// Istio's capture as root (which then needs everything they need), loopback
// addresses with explicit listeners otherwise.
func testNetwork(t *testing.T) pod.Kind {
	t.Helper()
	if os.Geteuid() != 0 {
		return pod.KindLoopback
	}
	testenv.NeedNetns(t)
	return pod.KindNetns
}

// tinyScenario is every mode, http, 2 s runs at a gentle rate.
func tinyScenario(t *testing.T, modes []scenario.Mode, conns []int) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Get("quick")
	if err != nil {
		t.Fatal(err)
	}
	d, w := 2*time.Second, 500*time.Millisecond
	s, err = s.Apply(scenario.Overrides{Duration: &d, Warmup: &w, QPS: []int{500}, Modes: modes, Connections: conns})
	if err != nil {
		t.Fatal(err)
	}
	s.Cooldown = scenario.Duration(200 * time.Millisecond)
	return s
}

func runLab(t *testing.T, kind pod.Kind, s *scenario.Scenario, hook func(string, *lab, scenario.RunSpec)) *Report {
	t.Helper()
	return runConfig(t, Config{Scenario: s, Network: kind, hook: hook})
}

// runConfig runs the lab's matrix with cfg, given the binaries, an output
// directory and a results store of the test's own.
func runConfig(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, _ := invokeConfig(t, cfg, Run)
	return rep
}

// invokeConfig runs the lab with cfg as run does (Run, a sweep), given the
// binaries, an output directory and a results store of the test's own
// (the report's DB); it returns what the lab printed too.
func invokeConfig(t *testing.T, cfg Config, run func(context.Context, Config) (*Report, error)) (*Report, string) {
	t.Helper()
	cfg.MeshperfBin, cfg.ProxyBin = binaries(t)
	dir := t.TempDir()
	var out strings.Builder
	cfg.OutDir, cfg.DBPath = filepath.Join(dir, "out"), filepath.Join(dir, "db", "meshperf.db")
	cfg.Out, cfg.Progress = &out, &out
	t.Cleanup(func() {
		if t.Failed() {
			logTails(t, filepath.Join(cfg.OutDir, "logs"))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg)
	t.Logf("lab output:\n%s", out.String())
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	return rep, out.String()
}

// Every protocol through every mode, with and without mTLS, in network
// namespaces with capture as root (on loopback with explicit listeners
// otherwise): each run must succeed without errors and pass the checks that
// its traffic went through each sidecar of the mode (as gRPC for gRPC, in
// mTLS where on). gRPC once failed in every mode and nothing noticed.
func TestLabProtocolMatrix(t *testing.T) {
	kind := testNetwork(t)
	for _, proto := range []scenario.Protocol{scenario.HTTP, scenario.H2, scenario.GRPC, scenario.TCP} {
		for _, mtls := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/mtls=%v", proto, mtls), func(t *testing.T) { testAllModes(t, kind, proto, mtls) })
		}
	}
}

// The loopback network's own run, as root too (the matrix then runs in
// network namespaces).
func TestLabAllModesLoopback(t *testing.T) {
	testAllModes(t, pod.KindLoopback, scenario.HTTP, true)
}

func testAllModes(t *testing.T, kind pod.Kind, proto scenario.Protocol, mtls bool) {
	modes := []scenario.Mode{scenario.NoMesh, scenario.ServerSidecar, scenario.ClientSidecar, scenario.BothSidecars}
	if !mtls {
		modes = modes[1:] // no-mesh is the same run either way
	}
	s, err := tinyScenario(t, modes, nil).Apply(scenario.Overrides{Protocol: &proto, MTLS: &mtls})
	if err != nil {
		t.Fatal(err)
	}
	rep := runLab(t, kind, s, nil)
	if len(rep.Outcomes) != len(modes) {
		t.Fatalf("%d runs, want %d", len(rep.Outcomes), len(modes))
	}
	wantChecks := map[string][]string{
		"no-mesh":        nil,
		"server-sidecar": {"server sidecar"},
		"client-sidecar": {"client sidecar"},
		"both-sidecars":  {"client sidecar", "server sidecar"},
	}
	if mtls {
		wantChecks["both-sidecars"] = append(wantChecks["both-sidecars"], "mutual_tls from spiffe://cluster.local/ns/lab/sa/client")
	}
	for _, o := range rep.Outcomes {
		r := o.Run
		if r.Failed {
			t.Errorf("%s failed: %s", r.Label, r.FailureReason)
			continue
		}
		if r.Network != string(kind) || r.Protocol != string(proto) || r.MTLS != (mtls && r.Mode == "both-sidecars") ||
			r.Calls < 300 || r.Errors != 0 {
			t.Errorf("%s: network %q protocol %q mTLS %v, %d calls, %d errors", r.Label, r.Network, r.Protocol, r.MTLS, r.Calls, r.Errors)
		}
		if len(r.Spectrum) != len(results.SpectrumPercentiles) {
			t.Errorf("%s: %d points of latency spectrum, want %d", r.Label, len(r.Spectrum), len(results.SpectrumPercentiles))
		}
		var names []string
		for _, c := range o.Checks {
			names = append(names, c.Name)
			if !c.OK {
				t.Errorf("%s: check %s failed: %s", r.Label, c.Name, c.Detail)
			}
		}
		if strings.Join(names, "|") != strings.Join(wantChecks[r.Mode], "|") {
			t.Errorf("%s: checks %q, want %q", r.Label, names, wantChecks[r.Mode])
		}
		client, server := scenario.Mode(r.Mode).Sidecars()
		for role, want := range map[string]bool{results.RoleClientSidecar: client, results.RoleServerSidecar: server,
			results.RoleClientApp: true, results.RoleServerApp: true} {
			p, ok := r.Process(role)
			// CPU is read in /proc's 10 ms ticks: over a window of about a
			// second at this rate an app (the echo server, the load
			// generator) can stay under one tick, a sidecar, which does
			// the most work per request, cannot.
			idleOK := role == results.RoleServerApp || role == results.RoleClientApp
			if ok != want || (ok && (p.VCPU < 0 || (p.VCPU == 0 && !idleOK) || p.RSSMB <= 0)) {
				t.Errorf("%s: process %s: present %v (want %v), %+v", r.Label, role, ok, want, p)
			}
			// A sidecar's workers block in epoll between requests, so each
			// request wakes one at least sometimes; its CPU splits into
			// user and kernel time that add up to the whole.
			if c := p.Counters; ok && !idleOK && (c == nil || !(c.VoluntarySwitchesPerRequest > 0) ||
				math.Abs(c.UserVCPU+c.SystemVCPU-p.VCPU) > 1e-9) {
				t.Errorf("%s: %s counters %+v; want switches per request > 0 and user + system = %.4f vCPU", r.Label, role, c, p.VCPU)
			}
		}
	}
	checkOutputs(t, rep)
	checkNothingLeft(t, rep)
}

func checkOutputs(t *testing.T, rep *Report) {
	t.Helper()
	for _, f := range []string{rep.CSV, rep.HTML} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("output %q missing or empty: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(rep.CSV)
	if n := strings.Count(string(csv), "\n"); n != 1+len(rep.Outcomes) {
		t.Errorf("CSV has %d lines, want header + %d", n, len(rep.Outcomes))
	}
	for _, o := range rep.Outcomes {
		if _, err := os.Stat(o.Run.FortioJSON); !o.Run.Failed && err != nil {
			t.Errorf("%s: no Fortio JSON: %v", o.Run.Label, err)
		}
	}
	_, runs := storedRuns(t, rep)
	if len(runs) != len(rep.Outcomes) {
		t.Errorf("store has %d runs, want %d", len(runs), len(rep.Outcomes))
	}
	for _, r := range runs {
		if !r.Failed && len(r.Spectrum) == 0 {
			t.Errorf("%s: stored without its latency spectrum", r.Label)
		}
		// The load generator at a set rate lists its send delay's P99.
		if !r.Failed && r.Corrected && (math.IsNaN(r.SendDelayP99) || r.SendDelayP99 < 0) {
			t.Errorf("%s: stored send delay P99 %v ms, want the load generator's", r.Label, r.SendDelayP99)
		}
	}
}

// storedRuns opens the report's store, closed when the test ends, and
// reads the invocation's runs from it.
func storedRuns(t *testing.T, rep *Report) (*results.Store, []results.Run) {
	t.Helper()
	store, err := results.Open(rep.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	runs, err := store.Runs(results.Filter{RunID: rep.RunID})
	if err != nil {
		t.Fatal(err)
	}
	return store, runs
}

// checkNothingLeft asserts that no namespace, link or process of the run
// survives it.
func checkNothingLeft(t *testing.T, rep *Report) {
	t.Helper()
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), rep.NamePrefix) {
			t.Errorf("network namespace %s left behind", e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, rep.NamePrefix) {
			t.Errorf("link %s left behind", i.Name)
		}
	}
	if len(rep.PIDs) < 4 {
		t.Errorf("only %d processes recorded", len(rep.PIDs))
	}
	for _, pid := range rep.PIDs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after the lab (kill 0: %v)", pid, err)
		}
	}
}

// A sidecar killed during a run fails that run, with the reason, and the
// lab restarts it for the next run.
func TestLabSidecarKilledMidRun(t *testing.T) {
	kind := testNetwork(t)
	s := tinyScenario(t, []scenario.Mode{scenario.BothSidecars}, []int{1, 2})
	var killed int
	hook := func(event string, l *lab, spec scenario.RunSpec) {
		if event != "load-started" || spec.Index != 0 {
			return
		}
		killed = l.serverSC.PID()
		go func() {
			// Kill it a second into the load: when is the test's subject.
			time.Sleep(time.Second)
			_ = syscall.Kill(killed, syscall.SIGKILL)
		}()
	}
	rep := runLab(t, kind, s, hook)
	if len(rep.Outcomes) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Outcomes))
	}
	first, second := rep.Outcomes[0].Run, rep.Outcomes[1].Run
	if !first.Failed || !strings.Contains(first.FailureReason, "server sidecar") || !strings.Contains(first.FailureReason, "killed") {
		t.Errorf("run with the killed sidecar (pid %d): failed %v, reason %q", killed, first.Failed, first.FailureReason)
	}
	if second.Failed {
		t.Errorf("the next run failed too: %s", second.FailureReason)
	}
	checkNothingLeft(t, rep)
}
