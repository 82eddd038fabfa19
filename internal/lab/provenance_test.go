package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/version"
)

// What each mode records as its mesh, and a parameters hash that follows
// what is measured (the rate) and not where it is written (the output
// directory) nor the scenario's name.
func TestLabProvenanceByMode(t *testing.T) {
	proxy := writeScript(t, `[ "$1" = --version ] || exit 1
echo 'meshperf-proxy 0.1.0 (commit 0a57828-dirty)'
`)
	zt := writeScript(t, `echo 'version.BuildInfo{Version:"62d8-dirty", GitRevision:"62d8-dirty", IstioVersion:"unknown"}'`+"\n")
	s := tinyScenario(t, []scenario.Mode{scenario.NoMesh, scenario.BothSidecars, scenario.Ambient}, []int{1})
	s.WithZtunnelTwins()
	cfg := Config{Scenario: s, ProxyBin: proxy, ZtunnelBin: zt, OutDir: "/tmp/a", Labels: "before the fix"}
	p, err := newLabProvenance(cfg)
	if err != nil {
		t.Fatal(err)
	}
	meshperfProxy := results.Component{Name: "meshperf-proxy", Version: "0.1.0", Commit: "0a57828-dirty"}
	ztunnel := results.Component{Name: "ztunnel", Version: "62d8-dirty", Commit: "62d8-dirty"}
	pilot := results.ThisBuild().Component("meshperf-pilot")
	for _, c := range []struct {
		mode          scenario.Mode
		data, control results.Component
	}{
		{scenario.NoMesh, results.Component{}, results.Component{}},
		{scenario.BothSidecars, meshperfProxy, pilot},
		{scenario.Ambient, meshperfProxy, pilot},
		{scenario.AmbientZtunnel, ztunnel, pilot},
	} {
		got := p.forMode(c.mode)
		if got.DataPlane != c.data || got.ControlPlane != c.control {
			t.Errorf("%s: data plane %+v, control plane %+v; want %+v, %+v", c.mode, got.DataPlane, got.ControlPlane, c.data, c.control)
		}
		if got.Labels != "before the fix" || got.Machine != results.LocalMachine() || got.Meshperf != results.ThisBuild() {
			t.Errorf("%s: labels %q machine %+v meshperf %+v", c.mode, got.Labels, got.Machine, got.Meshperf)
		}
	}
	hash := func(change func(c *Config)) string {
		t.Helper()
		c := cfg
		sc := *s
		c.Scenario = &sc
		change(&c)
		p, err := newLabProvenance(c)
		if err != nil {
			t.Fatal(err)
		}
		return p.common.ParamsHash
	}
	same := hash(func(c *Config) {})
	if same == "" {
		t.Fatal("no params hash")
	}
	if h := hash(func(c *Config) { c.OutDir, c.Scenario.Name, c.Labels = "/tmp/b", "renamed", "other" }); h != same {
		t.Errorf("params hash %s changed to %s with the output directory, name and labels", same, h)
	}
	if h := hash(func(c *Config) { c.Scenario.QPS = []int{1000} }); h == same {
		t.Errorf("params hash %s did not change with qps", h)
	}
	if h := hash(func(c *Config) { c.Scenario.ProxyConcurrency = 4 }); h == same {
		t.Errorf("params hash %s did not change with the proxy's concurrency", h)
	}
}

// A binary that is not meshperf-proxy is refused in one line naming it.
func TestProxyComponentRefusesOthers(t *testing.T) {
	other := writeScript(t, "echo 'envoy 1.31'\n")
	if _, err := ProxyComponent(other); err == nil || !strings.HasPrefix(err.Error(), "-proxy "+other+": does not answer `--version` as meshperf-proxy does") {
		t.Errorf("ProxyComponent(envoy) = %v", err)
	}
	old := writeScript(t, "echo 'meshperf-proxy 0.1.0'\n")
	if c, err := ProxyComponent(old); err != nil || c != (results.Component{Name: "meshperf-proxy", Version: "0.1.0"}) {
		t.Errorf("ProxyComponent(a build without its commit) = %+v, %v", c, err)
	}
}

// A real lab run records its provenance in the store, in each run's load
// result file and in the CSV: the proxy's version and commit as the binary
// gives them, meshperf pilot's, the labels, the machine.
func TestLabRecordsProvenance(t *testing.T) {
	s := tinyScenario(t, []scenario.Mode{scenario.NoMesh, scenario.BothSidecars}, []int{1})
	rep := runConfig(t, Config{Scenario: s, Network: pod.KindLoopback, Labels: "before the fix"})
	_, proxyBin := binaries(t)
	proxy, err := ProxyComponent(proxyBin)
	if err != nil {
		t.Fatal(err)
	}
	if len(proxy.Commit) < 40 {
		t.Errorf("meshperf-proxy --version gives commit %q, want the full commit it was built from", proxy.Commit)
	}
	st, err := results.Open(rep.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(results.Filter{RunID: rep.RunID})
	if err != nil || len(runs) != 2 {
		t.Fatalf("stored runs %d, %v; want 2", len(runs), err)
	}
	for _, r := range runs {
		p := r.Provenance
		if r.Failed {
			t.Errorf("%s failed: %s", r.Mode, r.FailureReason)
		}
		wantData, wantControl := results.Component{}, results.Component{}
		if r.Mode == string(scenario.BothSidecars) {
			wantData = proxy
			wantControl = results.Component{Name: "meshperf-pilot", Version: version.String(), Commit: results.ThisBuild().Component("").Commit}
		}
		if p.DataPlane != wantData || p.ControlPlane != wantControl {
			t.Errorf("%s: data plane %+v, control plane %+v; want %+v, %+v", r.Mode, p.DataPlane, p.ControlPlane, wantData, wantControl)
		}
		if p.Labels != "before the fix" || !p.Machine.SameAs(results.LocalMachine()) || p.ParamsHash == "" || p.Meshperf.Version != version.String() {
			t.Errorf("%s: provenance %+v", r.Mode, p)
		}
		file, err := results.ReadFortioFile(r.FortioJSON)
		if err != nil {
			t.Fatal(err)
		}
		if file.Provenance != p {
			t.Errorf("%s: the load result file's provenance %+v, the store's %+v", r.Mode, file.Provenance, p)
		}
	}
	csv, err := os.ReadFile(rep.CSV)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csv), ",meshperf-proxy,"+proxy.Version+","+proxy.Commit+",meshperf-pilot,") {
		t.Errorf("the CSV does not name the proxy and pilot:\n%s", csv)
	}
	html, err := os.ReadFile(rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<dt>Data plane</dt><dd>none in no-mesh<br>"+proxy.Describe()+" in both-sidecars<br>") {
		t.Errorf("the report's header does not name the data plane %s", proxy.Describe())
	}
}
