package scenario

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A topology file resolves relative to the scenario file, whatever the
// working directory; replicas overrides every service's numReplicas; a
// graph's defaults are the graph modes and no payload.
func TestTopologyRelativeToScenario(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "graphs"), 0o755); err != nil {
		t.Fatal(err)
	}
	topo := "services:\n- name: a\n  isEntrypoint: true\n  numReplicas: 2\n  script: [{call: b}]\n- name: b\n"
	if err := os.WriteFile(filepath.Join(dir, "graphs", "ab.yaml"), []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte("topology: graphs/ab.yaml\nreplicas: 3\nconnections: [2]\nqps: [10]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsGraph() || s.Graph == nil || s.Graph.Name != "ab" || s.Graph.Pods() != 6 {
		t.Fatalf("graph %+v", s.Graph)
	}
	if s.TopologySource != filepath.Join(dir, "graphs", "ab.yaml") {
		t.Errorf("TopologySource %q, want the file's absolute path", s.TopologySource)
	}
	if !reflect.DeepEqual(s.Modes, []Mode{NoMesh, BothSidecars}) || s.PayloadSize != 0 || len(s.Notes()) != 0 {
		t.Errorf("modes %v, payloadSize %d, notes %q", s.Modes, s.PayloadSize, s.Notes())
	}
	// The scenario file's directory, not the working directory, is where
	// a relative topology is looked for.
	bad := filepath.Join(dir, "graphs", "s.yaml")
	if err := os.WriteFile(bad, []byte("topology: graphs/ab.yaml\nconnections: [2]\nqps: [10]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	want := "scenario " + bad + ": topology: topology file " + filepath.Join(dir, "graphs", "graphs", "ab.yaml") + " does not exist"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load(%s) = %v, want %q...", bad, err, want)
	}
}

// A shipped topology by name; a payload size set with it has no effect,
// which Notes says.
func TestShippedTopologyAndPayloadNote(t *testing.T) {
	s, err := Parse("g.yaml", []byte("topology: tree-13\npayloadSize: 1024\nconnections: [2]\nqps: [10]\nmodes: [ambient]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.TopologySource != "tree-13" || s.Graph.Pods() != 13 {
		t.Errorf("source %q, %d pods", s.TopologySource, s.Graph.Pods())
	}
	if notes := strings.Join(s.Notes(), "|"); !strings.Contains(notes, "payloadSize: no effect with a topology") {
		t.Errorf("notes %q", notes)
	}
}

// app: acmeair runs the app (whose graph internal/acmeair gives), the
// graph modes by default; qps has no effect on its users, which Notes says.
func TestAppAcmeair(t *testing.T) {
	s, err := Parse("a.yaml", []byte("app: acmeair\nconnections: [50]\nqps: [100]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsGraph() || s.App != AppAcmeair || s.Graph != nil {
		t.Fatalf("app %q, graph %+v", s.App, s.Graph)
	}
	if !reflect.DeepEqual(s.Modes, []Mode{NoMesh, BothSidecars}) {
		t.Errorf("modes %v", s.Modes)
	}
	if notes := strings.Join(s.Notes(), "|"); !strings.Contains(notes, "qps: no effect with app acmeair") {
		t.Errorf("notes %q", notes)
	}
}
