package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// labStore builds a results database the way the lab fills one: for each
// invocation, three repetitions of no-mesh and both-sidecars at 1000 qps
// and 16 connections, each with its provenance.
type labStore struct {
	t     *testing.T
	path  string
	st    *results.Store
	start time.Time
	noise *rand.Rand
	n     int
}

func newLabStore(t *testing.T) *labStore {
	path := filepath.Join(t.TempDir(), "meshperf.db")
	st, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &labStore{t: t, path: path, st: st, start: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), noise: rand.New(rand.NewPCG(1, 1))}
}

// invocation stores one lab invocation of scenario "quick" by a data plane
// of that version on machine m, whose both-sidecars P99 is around p99 ms
// (3% noise per repetition) and no-mesh's around 1 ms.
func (s *labStore) invocation(version string, m results.Machine, p99 float64) string {
	s.n++
	runID := fmt.Sprintf("run%02d", s.n)
	start := s.start.Add(time.Duration(s.n) * 24 * time.Hour)
	for rep := 1; rep <= 3; rep++ {
		for i, mode := range []string{results.ModeNoMesh, "both-sidecars"} {
			level := 1.0
			prov := results.Provenance{Meshperf: results.Build{Version: "v0.9.0", Commit: "0123456789abcdef"}, Machine: m}
			var procs []results.Process
			if mode != results.ModeNoMesh {
				level = p99
				prov.DataPlane = results.Component{Name: "meshperf-proxy", Version: version}
				procs = []results.Process{
					{Role: results.RoleClientSidecar, VCPU: 0.12, RSSMB: 11},
					{Role: results.RoleServerSidecar, VCPU: 0.10, RSSMB: 11},
				}
			}
			v := level * (1 + 0.03*s.noise.NormFloat64())
			r := results.Run{
				RunID: runID, Label: fmt.Sprintf("%s_qps_1000_c_16_1024_%s", runID, mode), Scenario: "quick",
				Mode: mode, Protocol: "http", Repetition: rep, Connections: 16, RequestedQPS: 1000, ActualQPS: 1000,
				Duration: 30 * time.Second, StartTime: start.Add(time.Duration(2*rep+i) * time.Minute), Network: "netns",
				Latency: results.Latency{Min: v / 10, Max: v * 2, Avg: v / 3, P50: v / 4, P75: v / 3, P90: v / 2, P99: v, P999: v * 1.5, P9999: v * 1.8},
				Calls:   30000, Processes: procs, Provenance: prov,
			}
			if err := s.st.Insert(r); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	return runID
}

func runHistory(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := History(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// historyJSON is the part of history's -json the tests read.
type historyJSON struct {
	Mode          string `json:"mode"`
	Machine       string `json:"machine"`
	MachineChoice string `json:"machine_choice"`
	Points        []struct {
		Group string   `json:"group"`
		RunID string   `json:"run_id"`
		Runs  int      `json:"runs"`
		Value *float64 `json:"value"`
	} `json:"points"`
	Detected     bool `json:"detected"`
	ChangePoints []struct {
		Index       int      `json:"index"`
		GroupBefore string   `json:"group_before"`
		GroupAfter  string   `json:"group_after"`
		Relative    *float64 `json:"relative"`
		PValue      float64  `json:"p_value"`
		Verdict     string   `json:"verdict"`
	} `json:"change_points"`
	Regression bool `json:"regression"`
}

func decodeHistory(t *testing.T, out string) historyJSON {
	t.Helper()
	var h historyJSON
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("history -json: %v\n%s", err, out)
	}
	return h
}

// TestHistoryRegressionAtTheVersion: five invocations of v1.0 at 2 ms P99,
// five of v1.1 at 2.5 ms; the change point is at v1.1's first invocation,
// flagged as a regression of about 25%, and history exits 1.
func TestHistoryRegressionAtTheVersion(t *testing.T) {
	s := newLabStore(t)
	here := results.LocalMachine()
	for range 5 {
		s.invocation("v1.0", here, 2.0)
	}
	firstSlow := s.invocation("v1.1", here, 2.5)
	for range 4 {
		s.invocation("v1.1", here, 2.5)
	}
	code, out, errOut := runHistory(t, "quick", "-db", s.path)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1 (a regression)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"p99 of quick: both-sidecars at 1000 qps, 16 connections, by version",
		"machine: " + here.Key() + " (this machine)",
		"<- regression +2", // +2x.x%
		"regression at #6: v1.0 -> v1.1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(errOut, "meshperf history: regression: v1.0 -> v1.1, p99 +2") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr %q, want one line naming the regression", errOut)
	}

	code, out, _ = runHistory(t, "quick", "-db", s.path, "-json")
	h := decodeHistory(t, out)
	if code != exitFailed || !h.Regression || !h.Detected {
		t.Errorf("-json: exit %d, regression %v, detected %v; want 1, true, true", code, h.Regression, h.Detected)
	}
	if len(h.Points) != 10 || h.Points[0].Group != "v1.0" || h.Points[9].Group != "v1.1" || h.Points[0].Runs != 3 {
		t.Errorf("points %+v, want 10, v1.0 then v1.1, 3 runs each", h.Points)
	}
	if len(h.ChangePoints) != 1 {
		t.Fatalf("change points %+v, want one", h.ChangePoints)
	}
	cp := h.ChangePoints[0]
	if cp.Index != 5 || h.Points[cp.Index].RunID != firstSlow || cp.GroupBefore != "v1.0" || cp.GroupAfter != "v1.1" || cp.Verdict != "regression" {
		t.Errorf("change point %+v, want a regression at index 5 (%s), v1.0 -> v1.1", cp, firstSlow)
	}
	if cp.Relative == nil || math.Abs(*cp.Relative-0.25) > 0.03 || cp.PValue > 0.05 {
		t.Errorf("change point %+v: want about +25%% with p <= 0.05", cp)
	}

	// The same store, the added latency: also a regression at v1.1 (no-mesh
	// did not change); memory did not change at all.
	if code, out, _ := runHistory(t, "quick", "-db", s.path, "-metric", "added-p99", "-json"); code != exitFailed || decodeHistory(t, out).ChangePoints[0].Index != 5 {
		t.Errorf("added-p99: exit %d, want 1 with the change at index 5\n%s", code, out)
	}
	if code, out, _ := runHistory(t, "quick", "-db", s.path, "-metric", "mem"); code != exitOK || !strings.Contains(out, "none: the series is level") {
		t.Errorf("mem: exit %d, want 0 and no change point\n%s", code, out)
	}
}

// TestHistoryUnchangedSeries is the "noise must not raise alarms":
// ten invocations of one build, no change point, exit 0.
func TestHistoryUnchangedSeries(t *testing.T) {
	s := newLabStore(t)
	for range 10 {
		s.invocation("v1.0", results.LocalMachine(), 2.0)
	}
	code, out, errOut := runHistory(t, "quick", "-db", s.path, "-json")
	h := decodeHistory(t, out)
	if code != exitOK || len(h.ChangePoints) != 0 || h.Regression || errOut != "" {
		t.Errorf("exit %d, change points %+v, stderr %q; want 0, none, nothing", code, h.ChangePoints, errOut)
	}
	if len(h.Points) != 10 {
		t.Errorf("%d points, want 10", len(h.Points))
	}
}

// TestHistoryImprovementExitsZero: a faster version is a change point but
// not a failure.
func TestHistoryImprovementExitsZero(t *testing.T) {
	s := newLabStore(t)
	for i := range 10 {
		s.invocation(map[bool]string{true: "v1.0", false: "v1.1"}[i < 5], results.LocalMachine(), map[bool]float64{true: 2.5, false: 2.0}[i < 5])
	}
	code, out, _ := runHistory(t, "quick", "-db", s.path)
	if code != exitOK || !strings.Contains(out, "improvement at #6: v1.0 -> v1.1") {
		t.Errorf("exit %d, want 0 with an improvement at #6\n%s", code, out)
	}
}

// TestHistoryPicksTheMachine: runs from another machine only are used,
// and the output says why; -machine picks among several.
func TestHistoryPicksTheMachine(t *testing.T) {
	s := newLabStore(t)
	other := results.Machine{CPUs: 64, CPUModel: "Other CPU", MemoryMB: 256 * 1024}
	for range 4 {
		s.invocation("v1.0", other, 2.0)
	}
	code, out, _ := runHistory(t, "quick", "-db", s.path)
	if code != exitOK || !strings.Contains(out, "machine: Other CPU/64cpu/256GiB (the machine with most runs (24); this machine has none)") {
		t.Errorf("exit %d, want 0 and the other machine, said so\n%s", code, out)
	}
	s.invocation("v1.0", results.LocalMachine(), 2.0)
	if _, out, _ := runHistory(t, "quick", "-db", s.path, "-json"); len(decodeHistory(t, out).Points) != 1 {
		t.Errorf("this machine has one invocation; history showed\n%s", out)
	}
	if _, out, _ := runHistory(t, "quick", "-db", s.path, "-json", "-machine", other.Key()); len(decodeHistory(t, out).Points) != 4 {
		t.Errorf("-machine %s has four invocations; history showed\n%s", other.Key(), out)
	}
}

// TestHistoryTooFewPoints prints the series, then says why there is no
// analysis, exit 2.
func TestHistoryTooFewPoints(t *testing.T) {
	s := newLabStore(t)
	s.invocation("v1.0", results.LocalMachine(), 2.0)
	s.invocation("v1.1", results.LocalMachine(), 3.0)
	code, out, errOut := runHistory(t, "quick", "-db", s.path)
	if code != exitBadInput || errOut != "meshperf history: not enough points for change-point detection (need >= 3)\n" {
		t.Errorf("exit %d stderr %q, want 2 and the one line", code, errOut)
	}
	if !strings.Contains(out, "v1.0") || !strings.Contains(out, "v1.1") || strings.Contains(out, "change points") {
		t.Errorf("want the two points and no change-point section:\n%s", out)
	}
	// Between 3 and 9 points detection runs, and says a clean step needs 10.
	s.invocation("v1.1", results.LocalMachine(), 3.0)
	if code, out, _ := runHistory(t, "quick", "-db", s.path); code != exitOK || !strings.Contains(out, "note: with 3 points a change is unlikely to reach p <= 0.01; a clean step needs about 10") {
		t.Errorf("3 points: exit %d, want 0 and the note\n%s", code, out)
	}
}

func TestHistoryListsScenarios(t *testing.T) {
	s := newLabStore(t)
	code, out, _ := runHistory(t, "-db", s.path)
	if code != exitOK || out != s.path+" holds no lab runs\n" {
		t.Errorf("empty store: exit %d, %q", code, out)
	}
	s.invocation("v1.0", results.LocalMachine(), 2.0)
	s.invocation("v1.0", results.LocalMachine(), 2.0)
	code, out, _ = runHistory(t, "-db", s.path)
	if code != exitOK || !strings.Contains(out, "scenario  invocations  runs") || !strings.Contains(out, "quick     2            12") {
		t.Errorf("exit %d, want quick with 2 invocations and 12 runs:\n%s", code, out)
	}
}

// TestHistoryBadSelection: each is one line, exit 2.
func TestHistoryBadSelection(t *testing.T) {
	s := newLabStore(t)
	for range 3 {
		s.invocation("v1.0", results.LocalMachine(), 2.0)
	}
	// A second rate makes -qps necessary.
	if err := s.st.Insert(results.Run{RunID: "run99", Scenario: "quick", Mode: "both-sidecars", RequestedQPS: 500, Connections: 16,
		StartTime: s.start.Add(99 * 24 * time.Hour), Provenance: results.Provenance{Machine: results.LocalMachine()}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown scenario "nosuch": ` + s.path + " holds runs of quick"},
		{[]string{"quick", "-mode", "ambient"}, `unknown mode "ambient": quick ran no-mesh, both-sidecars`},
		{[]string{"quick"}, "quick ran both-sidecars at 500, 1000 qps; choose one with -qps"},
		{[]string{"quick", "-qps", "1500"}, "-qps 1500: quick ran both-sidecars at 500, 1000 qps"},
		{[]string{"quick", "-qps", "1000", "-mode", "no-mesh", "-metric", "added-p90"}, "added-p90 is what a mesh mode adds to no-mesh: choose a mesh mode with -mode"},
		{[]string{"quick", "-qps", "1000", "-machine", "nosuch"}, `no runs of quick on machine "nosuch"`},
		{[]string{"-db", filepath.Join(t.TempDir(), "none.db")}, "none.db: no such file or directory"},
	} {
		code, out, errOut := runHistory(t, append([]string{"-db", s.path}, c.args...)...)
		if code != exitBadInput || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.args, code, out, errOut, c.want)
		}
	}
	if code, out, _ := runHistory(t, "quick", "-db", s.path, "-qps", "1000", "-json"); code != exitOK || len(decodeHistory(t, out).Points) != 3 {
		t.Errorf("-qps 1000: exit %d, want the three invocations\n%s", code, out)
	}
}

// TestHistoryCploadSeries: a shape's cpload runs, one point per run, the
// control plane's versions on either side of the change.
func TestHistoryCploadSeries(t *testing.T) {
	s := newLabStore(t)
	store := func(version, params string, e2eP99 float64) {
		s.n++
		v := e2eP99 * (1 + 0.03*s.noise.NormFloat64())
		pushes := 2.0
		if err := s.st.InsertControlPlaneRun(results.ControlPlaneRun{
			Label: fmt.Sprintf("cp%02d", s.n), Shape: "booklab", Start: s.start.Add(time.Duration(s.n) * time.Hour),
			E2EP99: &v, Pushes: &pushes, ReportJSON: "{}",
			Provenance: results.Provenance{Meshperf: results.Build{Version: "v0.9.0"}, ParamsHash: params, Machine: results.LocalMachine(),
				ControlPlane: results.Component{Name: "meshperf-pilot", Version: version}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if i < 5 {
			store("v1.0", "abc", 100)
		} else {
			store("v1.1", "abc", 150)
		}
	}
	code, out, _ := runHistory(t, "-db", s.path, "-cpload", "booklab", "-json")
	h := decodeHistory(t, out)
	if code != exitFailed || len(h.ChangePoints) != 1 || h.ChangePoints[0].Index != 5 || h.ChangePoints[0].GroupBefore != "v1.0" || h.ChangePoints[0].GroupAfter != "v1.1" {
		t.Errorf("exit %d, change points %+v; want 1 and a regression at index 5, v1.0 -> v1.1\n%s", code, h.ChangePoints, out)
	}
	if len(h.Points) != 10 || h.Points[0].RunID != "cp01" || h.Points[0].Runs != 1 {
		t.Errorf("points %+v, want the 10 runs by label", h.Points)
	}
	if code, out, _ := runHistory(t, "-db", s.path, "-cpload", "booklab", "-metric", "pushes"); code != exitOK || !strings.Contains(out, "pushes of cpload shape booklab, parameters abc, by version") {
		t.Errorf("pushes: exit %d, want 0 and the shape's header\n%s", code, out)
	}

	// Another set of parameters makes -params necessary.
	store("v1.1", "def", 10)
	code, _, errOut := runHistory(t, "-db", s.path, "-cpload", "booklab")
	if code != exitBadInput || errOut != "meshperf history: cpload shape booklab ran with parameters abc (10 runs), def (1 run); choose one with -params\n" {
		t.Errorf("two parameter sets: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runHistory(t, "-db", s.path, "-cpload", "booklab", "-params", "abc", "-json"); code != exitFailed || len(decodeHistory(t, out).Points) != 10 {
		t.Errorf("-params abc: exit %d, want 1 over the 10 runs\n%s", code, out)
	}
	if code, _, errOut := runHistory(t, "-db", s.path, "-cpload", "uniform"); code != exitBadInput ||
		errOut != `meshperf history: unknown cpload shape "uniform": the store holds cpload runs of shapes booklab (cpload stores runs with -db)`+"\n" {
		t.Errorf("unknown shape: exit %d, stderr %q", code, errOut)
	}
}
