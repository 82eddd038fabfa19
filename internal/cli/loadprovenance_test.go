package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/version"
)

// The load's JSON result carries its provenance under "Provenance", and the
// results package reads it back from the file: this meshperf, the mesh the
// flags name as data and control plane, the labels, this machine, and a
// parameters hash that follows the rate but not the output file.
func TestLoadResultProvenance(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	dir := t.TempDir()
	run := func(name, qps string) results.Run {
		t.Helper()
		path := filepath.Join(dir, name)
		code, _, stderr := runLoadT(t, "-quiet", "-qps", qps, "-n", "20", "-json", path, "-labels", "canary a",
			"-mesh-name", "istio", "-mesh-version", "1.24.0", "http://"+addr+"/echo")
		if code != exitOK {
			t.Fatalf("exit %d; stderr %q", code, stderr)
		}
		r, err := results.ReadFortioFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, elsewhere, faster := run("a.json", "100"), run("b.json", "100"), run("c.json", "200")
	p := first.Provenance
	istio := results.Component{Name: "istio", Version: "1.24.0"}
	if p.Meshperf.Version != version.String() || p.DataPlane != istio || p.ControlPlane != istio {
		t.Errorf("provenance %+v: want meshperf %s, data and control plane istio 1.24.0", p, version.String())
	}
	if p.Labels != "canary a" || first.Label != "canary a" {
		t.Errorf("labels %q (Fortio's %q), want both \"canary a\"", p.Labels, first.Label)
	}
	if p.Machine != results.LocalMachine() {
		t.Errorf("machine %+v, want this one %+v", p.Machine, results.LocalMachine())
	}
	if p.ParamsHash == "" || elsewhere.Provenance.ParamsHash != p.ParamsHash {
		t.Errorf("params hash %q, and %q for the same load written elsewhere: want equal and set", p.ParamsHash, elsewhere.Provenance.ParamsHash)
	}
	if faster.Provenance.ParamsHash == p.ParamsHash {
		t.Errorf("params hash %q did not change with -qps", p.ParamsHash)
	}
}

// Without -mesh-name the mesh is none, and the JSON says nothing of it;
// -provenance (meshperf lab's way) is recorded as given.
func TestLoadProvenanceFlag(t *testing.T) {
	rs := newRecordingServer(t, echo.New(echo.Config{}).Handler())
	plain := decodeJSON[struct{ Provenance results.Provenance }](t, runJSON(t, "-n", "3", "-qps", "0", rs.URL+"/"))
	if plain.Provenance.DataPlane.Name != "" || plain.Provenance.ControlPlane.Name != "" || plain.Provenance.ParamsHash == "" {
		t.Errorf("provenance without -mesh-name %+v: want no mesh and a params hash", plain.Provenance)
	}
	given := results.Provenance{Meshperf: results.Build{Version: "v9"}, DataPlane: results.Component{Name: "meshperf-proxy", Version: "0.1.0", Commit: "abc"},
		ParamsHash: "00112233", Labels: "lab run", Machine: results.Machine{CPUs: 3}}
	js, err := json.Marshal(given)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeJSON[struct{ Provenance results.Provenance }](t, runJSON(t, "-n", "3", "-qps", "0", "-provenance", string(js), rs.URL+"/"))
	if got.Provenance != given {
		t.Errorf("-provenance recorded %+v, want %+v", got.Provenance, given)
	}
}
