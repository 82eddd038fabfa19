package scenario

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

// TestBadFiles checks every testdata/*.bad.yaml is rejected with the one-line
// error its first line announces, and that Load, reading the file by its
// path, says the same with the path in place of the base name.
func TestBadFiles(t *testing.T) {
	testutil.BadFiles(t, "testdata/*.bad.yaml", 40, func(name string, data []byte) error {
		_, err := Parse(name, data)
		if err != nil {
			path := filepath.Join("testdata", name)
			if _, lerr := Load(path); lerr == nil || lerr.Error() != strings.Replace(err.Error(), name, path, 1) {
				t.Errorf("Load(%s) = %v, want the same error as Parse", path, lerr)
			}
		}
		return err
	})
}

func TestShippedScenariosParse(t *testing.T) {
	list, err := List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	want := []string{"quick", "acmeair", "cpu-mem", "graph-100-pods", "graph-chain-5", "graph-fanout-10", "graph-istio-load", "graph-tree-13", "istio-1.24", "istio-1.24-ambient", "latency", "soak", "sweep"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("List() = %v, want %v (default first)", names, want)
	}
}

func TestShippedScenarioContents(t *testing.T) {
	quick := mustGet(t, "quick")
	if d := quick.EstimatedDuration(); d < 90*time.Second || d > 2*time.Minute {
		t.Errorf("quick runs %v of load, want about two minutes", d)
	}
	if len(quick.Modes) != 4 {
		t.Errorf("quick modes %v, want all four", quick.Modes)
	}
	lat := mustGet(t, "latency")
	if !reflect.DeepEqual(lat.Connections, []int{2, 4, 8, 16, 32, 64}) || !reflect.DeepEqual(lat.QPS, []int{1000}) {
		t.Errorf("latency: conn %v qps %v", lat.Connections, lat.QPS)
	}
	cm := mustGet(t, "cpu-mem")
	if !reflect.DeepEqual(cm.Connections, []int{16}) || cm.QPS[0] != 10 || cm.QPS[len(cm.QPS)-1] != 1000 {
		t.Errorf("cpu-mem: conn %v qps %v", cm.Connections, cm.QPS)
	}
	ist := mustGet(t, "istio-1.24")
	if !reflect.DeepEqual(ist.QPS, []int{500, 750, 1000, 1250, 1500}) || !reflect.DeepEqual(ist.Connections, []int{4}) ||
		ist.PayloadSize != 1024 || ist.ProxyConcurrency != 2 || !ist.MTLS || ist.Protocol != HTTP ||
		!reflect.DeepEqual(ist.Modes, []Mode{NoMesh, BothSidecars}) {
		t.Errorf("istio-1.24 = %+v", ist)
	}
	// The page whole: the same set-up with its four data planes, no mesh
	// first (the baseline of added latency); about an hour of load.
	amb := mustGet(t, "istio-1.24-ambient")
	if !reflect.DeepEqual(amb.QPS, ist.QPS) || !reflect.DeepEqual(amb.Connections, ist.Connections) ||
		amb.PayloadSize != 1024 || amb.ProxyConcurrency != 2 || !amb.MTLS || amb.Protocol != HTTP || amb.Repetitions != 3 ||
		amb.Duration.D() != time.Minute || amb.Warmup.D() != 10*time.Second ||
		!reflect.DeepEqual(amb.Modes, []Mode{NoMesh, Ambient, AmbientWaypoint, BothSidecars}) {
		t.Errorf("istio-1.24-ambient = %+v", amb)
	}
	if n := len(amb.Expand()); n != 60 {
		t.Errorf("istio-1.24-ambient expands to %d runs, want 60", n)
	}
	if d := amb.EstimatedDuration(); d < 60*time.Minute || d > 65*time.Minute {
		t.Errorf("istio-1.24-ambient runs %v, want the 62 min its comment says", d)
	}
	// The sweep's ladder climbs (lab sweep refuses one that does not) and
	// no mesh comes first, the baseline every loss is measured against.
	sw := mustGet(t, "sweep")
	if !reflect.DeepEqual(sw.Connections, []int{32}) || !reflect.DeepEqual(sw.Modes, []Mode{NoMesh, BothSidecars, Ambient}) ||
		sw.PayloadSize != 1024 || len(sw.QPS) != 10 || sw.QPS[0] != 500 || sw.QPS[9] != 24000 || !slices.IsSorted(sw.QPS) {
		t.Errorf("sweep = %+v", sw)
	}
	if d := sw.EstimatedDuration(); d != 30*11*time.Second {
		t.Errorf("sweep as a matrix runs %v, want the 5 min 30 s its comment says", d)
	}
}

func mustGet(t *testing.T, name string) *Scenario {
	t.Helper()
	s, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDefaults(t *testing.T) {
	s, err := Parse("dir/mine.yaml", []byte("connections: 8\nqps: [0]\nduration: 20\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Scenario{
		Name: "mine", Connections: []int{8}, QPS: []int{0},
		Duration: Duration(20 * time.Second), Warmup: Duration(4 * time.Second), Cooldown: Duration(2 * time.Second),
		PayloadSize: 1024, Protocol: HTTP, Modes: []Mode{NoMesh, ServerSidecar, ClientSidecar, BothSidecars},
		MTLS: true, ProxyConcurrency: 2, Repetitions: 1, Timeout: Duration(3 * time.Second),
	}
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("got  %+v\nwant %+v", *s, want)
	}
	long, err := Parse("long.yaml", []byte("connections: [1]\nqps: [1]\nduration: 5m\n"))
	if err != nil || long.Warmup.D() != 10*time.Second {
		t.Errorf("warm-up for 5m = %v (%v), want capped at 10s", long.Warmup.D(), err)
	}
}

func TestLoadNames(t *testing.T) {
	if s, err := Load(""); err != nil || s.Name != "quick" {
		t.Errorf("Load(\"\") = %v, %v; want quick", s, err)
	}
	if s, err := Load("latency"); err != nil || s.Name != "latency" {
		t.Errorf("Load(latency) = %v, %v", s, err)
	}
	_, err := Load("latncy")
	if err == nil || !strings.Contains(err.Error(), "acmeair, cpu-mem, graph-100-pods, graph-chain-5, graph-fanout-10, graph-istio-load, graph-tree-13, istio-1.24, istio-1.24-ambient, latency, quick") {
		t.Errorf("Load(latncy) = %v, want the shipped names listed", err)
	}
	_, err = Load("missing.yaml")
	if err == nil || !strings.Contains(err.Error(), "missing.yaml does not exist") {
		t.Errorf("Load(missing.yaml) = %v", err)
	}
	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte("connections: [3]\nqps: [30]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Load(path); err != nil || s.Name != "mine" || s.Connections[0] != 3 {
		t.Errorf("Load(%s) = %+v, %v", path, s, err)
	}
}

func TestNotes(t *testing.T) {
	s, err := Parse("n.yaml", []byte("connections: [1]\nqps: [1]\nmodes: [no-mesh, server-sidecar]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Notes(); len(n) != 1 || !strings.HasPrefix(n[0], "mtls: no effect") {
		t.Errorf("Notes() = %q", n)
	}
	if n := mustGet(t, "quick").Notes(); len(n) != 0 {
		t.Errorf("quick has notes %q", n)
	}
}

// The ambient modes parse from files and flags (Istio's run-label words
// too), expand as mutual TLS whatever mtls says, run no sidecar, and say
// so in the notes.
func TestAmbientModes(t *testing.T) {
	s, err := Parse("a.yaml", []byte("connections: [4]\nqps: [1000]\nmtls: false\nmodes: [no-mesh, ambient, ambient-waypoint]\n"))
	if err != nil {
		t.Fatal(err)
	}
	wantMTLS := map[Mode]bool{NoMesh: false, Ambient: true, AmbientWaypoint: true}
	for _, r := range s.Expand() {
		if r.MTLS != wantMTLS[r.Mode] {
			t.Errorf("%s: MTLS %v, want %v", r.Mode, r.MTLS, wantMTLS[r.Mode])
		}
	}
	if n := s.Notes(); len(n) != 1 || !strings.HasPrefix(n[0], "mtls: the ambient modes are mutual TLS") {
		t.Errorf("Notes() = %q", n)
	}
	for _, c := range []struct {
		m                        Mode
		client, server, nodes, w bool
		label                    string
	}{
		{Ambient, false, false, true, false, "ambient"},
		{AmbientWaypoint, false, false, true, true, "waypoint"},
		{AmbientZtunnel, false, false, true, false, "ambient_ztunnel"},
		{AmbientWaypointZtunnel, false, false, true, true, "waypoint_ztunnel"},
		{BothSidecars, true, true, false, false, "both"},
		{NoMesh, false, false, false, false, "baseline"},
	} {
		client, server := c.m.Sidecars()
		if client != c.client || server != c.server || c.m.NodeProxies() != c.nodes || c.m.Waypoint() != c.w || c.m.IstioLabel() != c.label {
			t.Errorf("%s: sidecars %v/%v node proxies %v waypoint %v label %q", c.m, client, server, c.m.NodeProxies(), c.m.Waypoint(), c.m.IstioLabel())
		}
	}
	got, err := ParseModes("-modes", "ambient,waypoint")
	if err != nil || !reflect.DeepEqual(got, []Mode{Ambient, AmbientWaypoint}) {
		t.Errorf("ParseModes(ambient,waypoint) = %v, %v", got, err)
	}
	// -ztunnel's twins follow their modes, once.
	tw := &Scenario{Modes: []Mode{NoMesh, Ambient, AmbientWaypoint, AmbientWaypointZtunnel, BothSidecars}}
	tw.WithZtunnelTwins()
	if want := []Mode{NoMesh, Ambient, AmbientZtunnel, AmbientWaypoint, AmbientWaypointZtunnel, BothSidecars}; !reflect.DeepEqual(tw.Modes, want) {
		t.Errorf("WithZtunnelTwins: %v, want %v", tw.Modes, want)
	}
	// The default set stays the four sidecar modes, which need no root.
	if d := mustGet(t, "quick").Modes; !reflect.DeepEqual(d, []Mode{NoMesh, ServerSidecar, ClientSidecar, BothSidecars}) {
		t.Errorf("quick's modes %v", d)
	}
}
