package compare

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/compare/comparetest"
	"github.com/meshperf/meshperf/internal/results"
)

var t0 = time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)

func side(t *testing.T, selector string, invs ...comparetest.Invocation) Side {
	t.Helper()
	s := Side{Selector: selector}
	for _, inv := range invs {
		rs, err := comparetest.Runs(inv)
		if err != nil {
			t.Fatal(err)
		}
		s.Runs = append(s.Runs, rs...)
	}
	return s
}

// testMachine is where the tests' runs say they ran.
var testMachine = results.Machine{Hostname: "lab1", CPUs: 2, CPUModel: "AMD EPYC 7B13", MemoryMB: 7940, Kernel: "Linux 6.8.0"}

func inv(id string, seed uint64, slowdownMs float64, dir string) comparetest.Invocation {
	return comparetest.Invocation{RunID: id, Scenario: "quick", Repetitions: 5, Start: t0.Add(time.Duration(seed) * time.Hour),
		SlowdownMs: slowdownMs, Seed: seed, Dir: dir,
		Provenance: results.Provenance{Meshperf: results.Build{Version: "v0.9.0", Commit: "abc1234"},
			DataPlane: results.Component{Name: "meshperf-proxy", Version: "v0.9.0"}, ControlPlane: results.Component{Name: "meshperf-pilot", Version: "v0.9.0"},
			ParamsHash: "0123456789abcdef", Machine: testMachine}}
}

func verdicts(rep Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Rows {
		out[r.Cell.String()] = r.Verdict
	}
	return out
}

func TestSameBuildIsUnchanged(t *testing.T) {
	rep := Compare(side(t, "v1", inv("r1", 1, 0, "")), side(t, "v1-again", inv("r2", 2, 0, "")), DefaultOptions)
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows, want 6 (3 modes x 2 connection counts)", len(rep.Rows))
	}
	for cell, v := range verdicts(rep) {
		if v != VerdictUnchanged {
			t.Errorf("%s: %q, want ~", cell, v)
		}
	}
	if rep.Verdict != VerdictUnchanged {
		t.Errorf("verdict %q", rep.Verdict)
	}
	if len(rep.Notes) != 0 {
		t.Errorf("notes %q, want none (same machine, scenario and parameters)", rep.Notes)
	}
}

// TestAcrossMachinesIsSaid: B ran on another kind of machine, with other
// parameters; the comparison goes on, and says so first.
func TestAcrossMachinesIsSaid(t *testing.T) {
	other := inv("r2", 2, 0, "")
	other.Provenance.Machine = results.Machine{Hostname: "ci7", CPUs: 8, CPUModel: "Intel Xeon 8375C", MemoryMB: 32000, Kernel: "Linux 6.1.0"}
	other.Provenance.ParamsHash = "fedcba9876543210"
	rep := Compare(side(t, "v1", inv("r1", 1, 0, "")), side(t, "v2", other), DefaultOptions)
	want := []string{
		"compared across machines: A ran on 2 CPUs (AMD EPYC 7B13), 7.8 GiB, Linux 6.8.0, B on 8 CPUs (Intel Xeon 8375C), 31.2 GiB, Linux 6.1.0",
		"compared across parameters: A ran 0123456789abcdef, B fedcba9876543210",
	}
	if !reflect.DeepEqual(rep.Notes, want) {
		t.Errorf("notes %q, want %q", rep.Notes, want)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "note: "+want[0]+"\n") {
		t.Errorf("the table does not start with the machines' note:\n%s", b.String())
	}
	for _, fact := range []string{"meshperf-proxy v0.9.0", "v0.9.0 (commit abc1234)", "meshperf-pilot v0.9.0", "Intel Xeon 8375C"} {
		if !strings.Contains(b.String(), fact) {
			t.Errorf("the table lacks the provenance %q", fact)
		}
	}
	if len(rep.Rows) != 6 {
		t.Errorf("%d rows, want 6: runs on other machines are still compared", len(rep.Rows))
	}
}

func TestSelfIsUnchanged(t *testing.T) {
	a := side(t, "v1", inv("r1", 1, 0, ""))
	rep := Compare(a, a, DefaultOptions)
	for _, r := range rep.Rows {
		for _, m := range r.Metrics {
			if m.Verdict != VerdictUnchanged || m.Diff != 0 {
				t.Errorf("%s %s: %q, diff %v; want ~, 0", r.Cell, m.Name, m.Verdict, m.Diff)
			}
		}
	}
}

// TestSlowdownIsWorseOnMeshRowsOnly: 200 us more per call on the mesh
// modes makes their rows worse (latency and added latency, short of the
// far tail, P99.9, whose noise in a short run can keep its interval from
// clearing the threshold), and leaves no-mesh and the proxies' cost alone.
func TestSlowdownIsWorseOnMeshRowsOnly(t *testing.T) {
	rep := Compare(side(t, "v1", inv("r1", 1, 0, "")), side(t, "v2", inv("r2", 2, 0.2, "")), DefaultOptions)
	for _, r := range rep.Rows {
		want := VerdictWorse
		if r.Mode == results.ModeNoMesh {
			want = VerdictUnchanged
		}
		if r.Verdict != want {
			t.Errorf("%s: %q, want %q", r.Cell, r.Verdict, want)
		}
		for _, m := range r.Metrics {
			latency := m.Unit == "ms"
			if r.Mode != results.ModeNoMesh && latency && m.Name != "P99.9" && m.Verdict != VerdictWorse {
				t.Errorf("%s %s: %q (diff %v), want worse", r.Cell, m.Name, m.Verdict, m.Diff)
			}
			if !latency && m.Verdict != VerdictUnchanged {
				t.Errorf("%s %s: %q, want ~ (the delay costs no CPU or memory)", r.Cell, m.Name, m.Verdict)
			}
			if strings.HasPrefix(m.Name, "+") && math.Abs(float64(m.Diff)-0.2) > 0.03 {
				t.Errorf("%s %s: diff %v ms, want about 0.2", r.Cell, m.Name, m.Diff)
			}
		}
	}
	if rep.Verdict != VerdictWorse {
		t.Errorf("verdict %q, want worse", rep.Verdict)
	}
}

func TestRowsMetricsAndCells(t *testing.T) {
	a := side(t, "v1", inv("r1", 1, 0, ""))
	b := side(t, "v2", inv("r2", 2, 0, ""))
	// B has no 16-connection ambient runs; A has one failed run.
	var kept []results.Run
	for _, r := range b.Runs {
		if !(r.Mode == "ambient" && r.Connections == 16) {
			kept = append(kept, r)
		}
	}
	b.Runs = kept
	a.Runs[3].Failed, a.Runs[3].FailureReason = true, "server-sidecar exited"
	rep := Compare(a, b, DefaultOptions)
	if len(rep.Rows) != 5 || len(rep.OnlyInA) != 1 || rep.OnlyInA[0].Mode != "ambient" || rep.OnlyInA[0].Connections != 16 || len(rep.OnlyInB) != 0 {
		t.Fatalf("%d rows, only in A %v, only in B %v; want 5, [ambient 16], []", len(rep.Rows), rep.OnlyInA, rep.OnlyInB)
	}
	if len(rep.A.Excluded) != 1 || rep.A.Runs != 30 || len(rep.A.Invocations) != 1 {
		t.Errorf("side A: %d excluded, %d runs, %v; want 1, 30, [r1]", len(rep.A.Excluded), rep.A.Runs, rep.A.Invocations)
	}
	names := func(r Row) []string {
		var out []string
		for _, m := range r.Metrics {
			out = append(out, m.Name)
		}
		return out
	}
	want := map[string][]string{
		"no-mesh":       {"P50", "P90", "P99", "P99.9"},
		"both-sidecars": {"P50", "P90", "P99", "P99.9", "+P50", "+P90", "+P99", "vCPU/1k rps sidecar", "MB/proxy sidecar"},
		"ambient":       {"P50", "P90", "P99", "P99.9", "+P50", "+P90", "+P99", "vCPU/1k rps node proxy", "MB/proxy node proxy"},
	}
	for _, r := range rep.Rows {
		if got := names(r); !reflect.DeepEqual(got, want[r.Mode]) {
			t.Errorf("%s: metrics %v, want %v", r.Cell, got, want[r.Mode])
		}
	}
	// The failed run (a 2-connection run of the first repetition) is left
	// out of its row: 4 repetitions on A.
	failed := a.Runs[3]
	for _, r := range rep.Rows {
		if r.Mode == failed.Mode && r.Connections == failed.Connections && r.Metrics[0].A.N != 4 {
			t.Errorf("%s: A has %d repetitions, want 4 (one failed)", r.Cell, r.Metrics[0].A.N)
		}
	}
}

func TestTooFewRepetitions(t *testing.T) {
	two := inv("r1", 1, 0, "")
	two.Repetitions = 2
	rep := Compare(side(t, "v1", two), side(t, "v2", inv("r2", 2, 0.2, "")), DefaultOptions)
	for _, r := range rep.Rows {
		if r.Verdict != VerdictTooFew {
			t.Errorf("%s: %q, want %q", r.Cell, r.Verdict, VerdictTooFew)
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not enough repetitions (need >= 3)") {
		t.Errorf("table does not say why there is no verdict:\n%s", b.String())
	}
}

// TestPooledInvocationsKeepTheirBaselines: a side made of two invocations,
// the second on a machine 50% slower throughout, pools its repetitions;
// each repetition's added latency is against its own invocation's no-mesh,
// so the added latency stays what the mesh adds.
func TestPooledInvocationsKeepTheirBaselines(t *testing.T) {
	a := side(t, "v1", inv("r1", 1, 0, ""))
	b := side(t, "v2", inv("r2", 2, 0, ""), inv("r3", 3, 0, ""))
	for i := range b.Runs {
		if b.Runs[i].RunID == "r3" {
			b.Runs[i].Latency.P50 *= 1.5
		}
	}
	rep := Compare(a, b, DefaultOptions)
	if len(rep.B.Invocations) != 2 {
		t.Fatalf("B invocations %v", rep.B.Invocations)
	}
	for _, r := range rep.Rows {
		for _, m := range r.Metrics {
			if m.Name == "P50" && m.B.N != 10 {
				t.Errorf("%s: B has %d repetitions, want 10", r.Cell, m.B.N)
			}
			if m.Name == "+P50" && m.B.StdDev > 0.1 {
				t.Errorf("%s +P50: B's repetitions spread %v ms; each should be against its own no-mesh", r.Cell, m.B.StdDev)
			}
		}
	}
}

func TestHistogramIntervals(t *testing.T) {
	dir := t.TempDir()
	rep := Compare(side(t, "v1", inv("r1", 1, 0, dir)), side(t, "v2", inv("r2", 2, 0, "")), DefaultOptions)
	for _, r := range rep.Rows {
		for _, m := range r.Metrics {
			if m.Unit != "ms" || strings.HasPrefix(m.Name, "+") {
				if m.Histogram != nil {
					t.Errorf("%s %s has a histogram interval", r.Cell, m.Name)
				}
				continue
			}
			h := m.Histogram
			if h == nil {
				t.Fatalf("%s %s: no histogram interval", r.Cell, m.Name)
			}
			if h[0].Source != SourceHistogram || h[1].Source != SourceSpectrum || h[0].Calls != 5*20000 {
				t.Errorf("%s %s: sources %q, %q, %d calls; want histogram, spectrum, 100000", r.Cell, m.Name, h[0].Source, h[1].Source, h[0].Calls)
			}
			for i, e := range h {
				if !(e.CI.Lo <= e.Value && e.Value <= e.CI.Hi && e.CI.Lo < e.CI.Hi) {
					t.Errorf("%s %s side %d: %v not within [%v, %v]", r.Cell, m.Name, i, e.Value, e.CI.Lo, e.CI.Hi)
				}
			}
			// The pooled percentile is near the repetitions' median.
			if rel := math.Abs(float64(h[0].Value-m.A.Median)) / float64(m.A.Median); rel > 0.1 {
				t.Errorf("%s %s: pooled %v, repetitions' median %v", r.Cell, m.Name, h[0].Value, m.A.Median)
			}
		}
		if r.Latency[0] == nil || len(r.Latency[0].Buckets) == 0 || r.Latency[1] == nil || len(r.Latency[1].Buckets) != 0 {
			t.Errorf("%s: side A should have histogram buckets, B (spectra) none", r.Cell)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rep := Compare(side(t, "v1", inv("r1", 1, 0, t.TempDir())), side(t, "v2", inv("r2", 2, 0.2, "")), DefaultOptions)
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	// NaN != NaN, so compare the two encodings.
	again, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := json.Marshal(rep)
	if !bytes.Equal(first, again) {
		t.Error("the report read back from its JSON encodes differently")
	}
	if back.Verdict != VerdictWorse || len(back.Rows) != len(rep.Rows) || back.Confidence != 0.95 || back.ThresholdPct != 5 {
		t.Errorf("read back: verdict %q, %d rows, confidence %v, threshold %v", back.Verdict, len(back.Rows), back.Confidence, back.ThresholdPct)
	}
	// An unknown figure (too few repetitions for a spread) is null, and
	// reads back as unknown.
	var n struct{ StdDev Number }
	if err := json.Unmarshal([]byte(`{"StdDev": null}`), &n); err != nil || !n.StdDev.IsNaN() {
		t.Errorf("null read as %v (%v), want NaN", n.StdDev, err)
	}
	if b, err := json.Marshal(summarize([]float64{1})); err != nil || !strings.Contains(string(b), `"stddev":null`) {
		t.Errorf("one repetition encodes as %s (%v), want a null stddev", b, err)
	}
}
