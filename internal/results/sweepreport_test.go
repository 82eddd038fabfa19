package results

import (
	"bytes"
	"html/template"
	"maps"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/capacity"
)

// sweepAnalysis is capacity.Analyze's analysis of a sweep over no-mesh,
// both-sidecars and ambient with a hockey-stick latency (linear, then
// rising with the square of the rate past each mode's bend) under p99=5ms
// and p50=1ms, advice at 2500 rps:
//   - no-mesh: 500 to 3500 rps, straight (no knee), its last step
//     generator-bound, so its capacity is a lower bound (≥ 2998);
//   - both-sidecars: bends at 1500, p99 broken at 2500, a refined step at
//     2250 that held p99 (its capacity 2248) but broke p50 (capacity under
//     both 1998), two sidecars' CPU and memory;
//   - ambient: bends at 2200, p50 broken at 3000 (capacity 2498), p99
//     never (≥ 2998); its server node proxy's memory flat (a fit with
//     NaN R²), one step's client node proxy vCPU NaN.
func sweepAnalysis(t *testing.T) capacity.Analysis {
	t.Helper()
	var objs capacity.Objectives
	if err := objs.Set("p99=5ms,p50=1ms"); err != nil {
		t.Fatal(err)
	}
	in := capacity.Input{Objectives: objs, TargetRPS: 2500, Baseline: ModeNoMesh, CPUs: 4}
	for _, m := range []struct {
		mode, stop string
		rates      []int
		refined    int
		base, bend float64
		roles      []string
		kind       string
	}{
		{ModeNoMesh, "generator-bound at 3500 rps", []int{500, 1000, 1500, 2000, 2500, 3000, 3500}, 0, 0.2, 4000, nil, ""},
		{"both-sidecars", "objective broken at 2500 rps", []int{500, 1000, 1500, 2000, 2500}, 2250, 0.5, 1500,
			[]string{RoleClientSidecar, RoleServerSidecar}, ProxySidecar},
		{"ambient", "objective broken at 3000 rps", []int{500, 1000, 1500, 2000, 2500, 3000}, 0, 0.35, 2200,
			[]string{RoleClientNodeProxy, RoleServerNodeProxy}, ProxyNodeProxy},
	} {
		ms := capacity.ModeSteps{Mode: m.mode, StopReason: m.stop}
		rates := m.rates
		if m.refined > 0 {
			rates = append(rates, m.refined)
		}
		for i, req := range rates {
			x := float64(req) - 2
			over := math.Max(0, x-m.bend) / 100
			lat := m.base + 0.0001*x + 0.01*over*over
			st := capacity.Step{Label: m.mode + "_" + QPSText(req), RequestedRPS: req, ActualRPS: x, Refined: req == m.refined,
				Latency:   []capacity.PercentileMS{{Percentile: 50, MS: lat}, {Percentile: 90, MS: 1.6 * lat}, {Percentile: 99, MS: 3 * lat}},
				Generator: capacity.Saturation{VCPU: 0.2 + x/4000, Cores: 2, SendDelayP99MS: 0.05},
				Server:    capacity.Saturation{VCPU: 0.3, Cores: 4, SendDelayP99MS: math.NaN()}}
			for k, r := range m.roles {
				// The client's proxy works harder than the server's,
				// ambient's node proxies less than sidecars; a little
				// scatter so that the fits are not exact.
				scale := (1 - 0.25*float64(k)) * map[string]float64{"both-sidecars": 1, "ambient": 0.6}[m.mode]
				u := capacity.ProxyUsage{Role: r, Kind: m.kind,
					VCPU: (0.02 + x*0.00012 + 0.004*float64(i%2)) * scale, MemMB: (14 + x*0.0015 + 0.3*float64(i%3)) * scale}
				if r == RoleServerNodeProxy {
					u.MemMB = 9
				}
				if r == RoleClientNodeProxy && req == 2000 {
					u.VCPU = math.NaN()
				}
				st.Proxies = append(st.Proxies, u)
			}
			if req == 3500 {
				st.Generator.VCPU = 1.95
			}
			ms.Steps = append(ms.Steps, st)
		}
		in.Modes = append(in.Modes, ms)
	}
	return capacity.Analyze(in)
}

// sweepRuns are the sweep's steps as runs, what the lab stores.
func sweepRuns(a capacity.Analysis) []Run {
	var runs []Run
	for _, c := range a.Curves {
		for _, st := range c.Steps {
			r := mk(c.Mode, 16, st.RequestedRPS, stepMS(st, 50), stepMS(st, 90), stepMS(st, 99), st.ActualRPS, nil, nil)
			r.Label, r.Scenario = st.Label, "sweep"
			runs = append(runs, r)
		}
	}
	return runs
}

func sweepReport(t *testing.T, a capacity.Analysis) string {
	t.Helper()
	return sweepReportTo(t, a, "")
}

// sweepReportTo renders the sweep's report, and writes it to path if set.
func sweepReportTo(t *testing.T, a capacity.Analysis, path string) string {
	t.Helper()
	runs := sweepRuns(a)
	s := Summarize(runs)
	s.Machine = Machine{CPUs: 4, Kernel: "Linux 6.1-test"}
	s.Sweep = &Sweep{RunID: "id", Scenario: "sweep", Analysis: a}
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, s); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	if path != "" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return doc
}

func TestSweepReportCharts(t *testing.T) {
	// To look at the page: MESHPERF_SWEEP_REPORT=/tmp/sweep.html.
	doc := sweepReportTo(t, sweepAnalysis(t), os.Getenv("MESHPERF_SWEEP_REPORT"))
	figs := figures(t, doc)
	// The sweep's charts stand in for the per-point ones: none of those.
	want := map[string]int{"sweep-latency-p50": 1, "sweep-latency-p90": 1, "sweep-latency-p99": 1,
		"sweep-latency-log-p50": 1, "sweep-latency-log-p90": 1, "sweep-latency-log-p99": 1, "sweep-cpu": 1, "sweep-memory": 1}
	if got := countKinds(figs); !maps.Equal(got, want) {
		t.Errorf("charts by kind %v, want %v", got, want)
	}
	byKind := map[string]figure{}
	for _, f := range figs {
		byKind[f.kind] = f
	}
	for _, k := range []string{"sweep-latency-p99", "sweep-latency-log-p99"} {
		f := byKind[k]
		for _, text := range []string{"p99=5ms", "P99 knee", "generator-bound (excluded)"} {
			if !strings.Contains(f.text, text) {
				t.Errorf("%s lacks %q: %q", k, text, f.text)
			}
		}
		if strings.Contains(f.text, "p50=1ms") {
			t.Errorf("%s draws the p50 objective", k)
		}
		if got := strings.Join(f.series, ","); got != "no-mesh,both-sidecars,ambient" {
			t.Errorf("%s draws %s", k, got)
		}
	}
	if f := byKind["sweep-latency-p50"]; !strings.Contains(f.text, "p50=1ms") || !strings.Contains(f.text, "P50 knee") {
		t.Errorf("the P50 chart lacks its objective or knee: %q", f.text)
	}
	if f := byKind["sweep-latency-p90"]; strings.Contains(f.text, "=") {
		t.Errorf("the P90 chart draws an objective, there is none on P90: %q", f.text)
	}
	// The fits' R², a NaN one as n/a; no-mesh has no proxy to draw.
	wantCPU := "both-sidecars client-sidecar, R² 1.00,both-sidecars server-sidecar, R² 1.00,ambient client-node-proxy, R² 1.00,ambient server-node-proxy, R² 1.00"
	if got := strings.Join(byKind["sweep-cpu"].series, ","); got != wantCPU {
		t.Errorf("CPU chart's lines %q, want %q", got, wantCPU)
	}
	if got := strings.Join(byKind["sweep-memory"].series, ","); !strings.Contains(got, "ambient server-node-proxy, R² n/a") {
		t.Errorf("memory chart's lines %q lack the NaN fit's R² as n/a", got)
	}
	// The log-scale charts are folded away.
	if i, j := strings.Index(doc, "<summary>Latency on a log scale</summary>"), strings.Index(doc, `data-kind="sweep-latency-log-p50"`); i < 0 || j < i {
		t.Error("the log-scale charts are not inside their <details>")
	}
	if !strings.Contains(doc, "Hollow grey points are steps where the load generator") {
		t.Error("the caption does not explain the generator-bound steps")
	}
}

func TestSweepReportTables(t *testing.T) {
	a := sweepAnalysis(t)
	doc := sweepReport(t, a)
	checkRows(t, "capacity", tableRows(t, doc, "sweep-capacity"),
		"mode|capacity, all objectives|p99=5ms|p50=1ms|lost to the mesh (rps)|lost (%)|why the sweep stopped",
		"no-mesh|≥ 2998 rps|≥ 2998 rps|≥ 2998 rps|baseline||generator-bound at 3500 rps",
		"both-sidecars|1998 rps|2248 rps|1998 rps|≈ 1000|≈ 33.4%|objective broken at 2500 rps",
		"ambient|2498 rps|≥ 2998 rps|2498 rps|≈ 500|≈ 16.7%|objective broken at 3000 rps")
	if !strings.Contains(doc, "Objectives: p99=5ms, p50=1ms; target rate 2500 rps; baseline no-mesh; 4 CPUs.") {
		t.Error("the line above the capacity table does not give the objectives and target")
	}
	for _, l := range a.Losses {
		if l.Note == "" || !strings.Contains(doc, template.HTMLEscapeString(l.Mode+": "+l.Note)) {
			t.Errorf("the approximate loss's note is missing: %+v", l)
		}
	}
	noKnee := a.Curves[0].Knees
	if noKnee[0].Found || noKnee[2].Found {
		t.Fatalf("no-mesh's straight curve has a knee: %+v", noKnee)
	}
	checkRows(t, "knees", tableRows(t, doc, "sweep-knees"),
		"mode|P50 knee|P90 knee|P99 knee",
		"no-mesh|none: "+noKnee[0].Why+"|none: "+noKnee[1].Why+"|none: "+noKnee[2].Why,
		"both-sidecars|at 1998 rps (0.948 ms)|at 1998 rps (1.52 ms)|at 1998 rps (2.84 ms)",
		"ambient|at 2498 rps (0.689 ms)|at 2498 rps (1.10 ms)|at 2498 rps (2.07 ms)")
	if len(a.Advice) != 2 {
		t.Fatalf("advice %+v, want both-sidecars' sidecar and ambient's node proxy", a.Advice)
	}
	checkRows(t, "advice", tableRows(t, doc, "sweep-advice"),
		"mode|proxy|vCPU|margin (vCPU)|MB|margin (MB)|extrapolated|objectives met here|evidence",
		"both-sidecars|sidecar|0.330|0.005|19.0|0.6|yes|no|"+a.Advice[0].Evidence,
		"ambient|node proxy|0.200|0.003|12.0|0.3|no|yes|"+a.Advice[1].Evidence)
	if !strings.Contains(doc, "For 2500 rps under p99=5ms, p50=1ms: what to reserve per proxy") {
		t.Error("the line above the advice does not give the target and objectives")
	}
	// Steps: both-sidecars' refined step marked, no-mesh's generator-bound
	// one shaded with its verdict and the generator's CPU against its
	// cores, ambient's NaN vCPU no obstacle.
	if !strings.Contains(doc, `<td>2250 <span class="note">refined</span></td><td>2248</td>`) {
		t.Error("the refined step is not marked")
	}
	a.Curves[2].Steps[0].Repetitions = 3
	if !strings.Contains(sweepReport(t, a), `<td>500 <span class="note">median of 3</span></td>`) {
		t.Error("a step that is the median of 3 runs does not say so")
	}
	if !strings.Contains(doc, `<tr class="excluded"><td>3500</td><td>3498</td>`) ||
		!strings.Contains(doc, `<td>1.950 of 2</td><td>0.050</td><td class="l">generator-bound</td><td class="l">load generator saturated: 1.95 of 2 vCPU</td>`) {
		t.Error("the generator-bound step is not shown as such")
	}
	// The rest of the report stays.
	for _, id := range []string{`<table id="summary">`, `<table id="runs">`} {
		if !strings.Contains(doc, id) {
			t.Errorf("the report lost %s", id)
		}
	}
	if i, j := strings.Index(doc, `<h2>Capacity</h2>`), strings.Index(doc, `<h2>Summary</h2>`); i < 0 || i > j {
		t.Error("the sweep's part is not first after the header")
	}
}

// A sweep with nothing to draw (every step failed, or none) renders its
// tables without charts instead of failing.
func TestSweepReportNothingToDraw(t *testing.T) {
	a := sweepAnalysis(t)
	for i := range a.Curves {
		for j := range a.Curves[i].Steps {
			a.Curves[i].Steps[j].Failed = true
		}
	}
	doc := sweepReport(t, a)
	if n := len(figures(t, doc)); n != 0 {
		t.Errorf("%d charts drawn from failed steps", n)
	}
	doc = sweepReport(t, capacity.Analysis{})
	if !strings.Contains(doc, "No mode was swept.") || len(figures(t, doc)) != 0 {
		t.Error("an empty sweep does not say so")
	}
}

func TestLogTicks125(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks125{}).Ticks(0.3, 6) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0.5 1 2 5" {
		t.Errorf("labels %q, want 0.5 1 2 5", got)
	}
	if ticks := (logTicks125{}).Ticks(0, 1); ticks != nil {
		t.Errorf("ticks %v on a range a log axis cannot have", ticks)
	}
}

// A step that gave way (its rate not kept) can be a thousand times slower
// than the rest: the linear charts keep their scale for the curve and mark
// it above the scale, the log-scale ones draw it where it is.
func TestSweepReportSaturatedStepAboveTheLinearScale(t *testing.T) {
	a := sweepAnalysis(t)
	c := &a.Curves[2] // ambient
	st := c.Steps[len(c.Steps)-1]
	st.RequestedRPS, st.ActualRPS = 4000, 3100
	st.Latency = []capacity.PercentileMS{{Percentile: 50, MS: 1500}, {Percentile: 90, MS: 1900}, {Percentile: 99, MS: 2100}}
	c.Steps = append(c.Steps, st)
	c.Judgements = append(c.Judgements, capacity.Judgement{Verdict: capacity.RateNotKept})
	byKind := map[string]figure{}
	for _, f := range figures(t, sweepReport(t, a)) {
		byKind[f.kind] = f
	}
	if f := byKind["sweep-latency-p99"]; !strings.Contains(f.text, "above the scale (see log scale)") || yTickMax(t, f.text, "P99 latency (ms)") > 100 {
		t.Errorf("linear P99 chart %q; want the saturated step marked above a scale that stops well below 2100 ms", f.text)
	}
	if f := byKind["sweep-latency-log-p99"]; strings.Contains(f.text, "above the scale") || yTickMax(t, f.text, "P99 latency (ms, log scale)") < 2000 {
		t.Errorf("log P99 chart %q; want the saturated step drawn where it is (axis past 2000 ms)", f.text)
	}
}

// yTickMax is the highest number among a chart's texts after its y
// axis's label (the tick labels), up to the first that is not a number.
func yTickMax(t *testing.T, text, yLabel string) float64 {
	t.Helper()
	i := strings.Index(text, yLabel)
	if i < 0 {
		t.Fatalf("no y label %q in %q", yLabel, text)
	}
	most := math.Inf(-1)
	for _, field := range strings.Fields(text[i+len(yLabel):]) {
		v, err := strconv.ParseFloat(field, 64)
		if err != nil {
			break
		}
		most = math.Max(most, v)
	}
	return most
}
