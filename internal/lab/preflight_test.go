package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ztunnel")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A ztunnel is asked `version` and must answer as ztunnel does; anything
// else is refused naming the path.
func TestZtunnelVersion(t *testing.T) {
	good := writeScript(t, `[ "$1" = version ] || exit 1
echo 'version.BuildInfo{Version:"1.24.0", GitRevision:"abc", RustVersion:"1.90.0"}'
`)
	want := results.Component{Name: "ztunnel", Version: "1.24.0", Commit: "abc"}
	if c, err := ztunnelComponent(good); err != nil || c != want {
		t.Errorf("ztunnelComponent(good) = %+v, %v; want %+v", c, err, want)
	}
	notExec := filepath.Join(t.TempDir(), "ztunnel")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"/nonexistent/ztunnel", "no such file"},
		{t.TempDir(), "is a directory"},
		{notExec, "not executable"},
		{writeScript(t, "echo hello\n"), "does not answer `version` as ztunnel does"},
		{writeScript(t, "echo broken >&2; exit 4\n"), "failed (exit status 4): broken"},
	} {
		_, err := ztunnelComponent(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "-ztunnel "+c.path+": ") {
			t.Errorf("ztunnelComponent(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
}

func TestPreflight(t *testing.T) {
	modes := func(m ...scenario.Mode) *scenario.Scenario { return &scenario.Scenario{Modes: m} }
	cases := []struct {
		cfg  Config
		want string // "" means accepted
	}{
		{Config{Scenario: modes(scenario.NoMesh, scenario.BothSidecars), Network: pod.KindLoopback}, ""},
		{Config{Scenario: modes(scenario.Ambient), Network: pod.KindLoopback}, "mode ambient needs network namespaces"},
		{Config{Scenario: modes(scenario.NoMesh, scenario.AmbientWaypoint), Network: pod.KindLoopback}, "mode ambient-waypoint needs network namespaces"},
		{Config{Scenario: modes(scenario.NoMesh), ZtunnelBin: "/bin/true"}, "-ztunnel: no ambient mode"},
		{Config{Scenario: modes(scenario.Ambient, scenario.AmbientZtunnel), Network: pod.KindNetns}, "mode ambient-ztunnel runs the real ztunnel: give its binary with -ztunnel PATH"},
		{Config{Scenario: modes(scenario.Ambient), ZtunnelBin: "/nonexistent/ztunnel", Network: pod.KindNetns}, "no such file"},
	}
	if os.Geteuid() != 0 {
		cases = append(cases, struct {
			cfg  Config
			want string
		}{Config{Scenario: modes(scenario.Ambient)}, "mode ambient needs root"})
	}
	for _, c := range cases {
		err := Preflight(c.cfg)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Preflight(modes %v, network %q, ztunnel %q) = %v, want %q", c.cfg.Scenario.Modes, c.cfg.Network, c.cfg.ZtunnelBin, err, c.want)
		}
	}
}
