package results

import (
	"bytes"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
)

// sweepAnalysis is a finished sweep as capacity.Analyze would hand it
// over: no-mesh, both-sidecars and ambient, six steps each at 500 to 3000
// requested rps with a hockey-stick latency; no-mesh's last step
// generator-bound, both-sidecars' broken by its p99, ambient's knee at p50
// not found, one refined step, a fit with NaN R², a step with NaN vCPU,
// the capacity lost to each mode and advice at 2500 rps.
func sweepAnalysis() capacity.Analysis {
	objs := capacity.Objectives{{Percentile: 99, Limit: 5 * time.Millisecond}, {Percentile: 50, Limit: time.Millisecond}}
	a := capacity.Analysis{Objectives: objs, TargetRPS: 2500, Baseline: "no-mesh", CPUs: 4}
	// bend is where each mode's latency turns up, in rps.
	for _, m := range []struct {
		mode  string
		base  float64
		bend  float64
		roles []string
	}{
		{"no-mesh", 0.2, 2600, nil},
		{"both-sidecars", 0.5, 1800, []string{RoleClientSidecar, RoleServerSidecar}},
		{"ambient", 0.35, 2200, []string{"client-node-proxy", "server-node-proxy"}},
	} {
		c := capacity.Curve{Mode: m.mode, StopReason: "end of range (3000 rps)"}
		for i, req := range []int{500, 1000, 1500, 2000, 2500, 3000} {
			actual := float64(req) * 0.998
			over := math.Max(0, actual-m.bend) / 100
			lat := func(mult float64) float64 { return (m.base + 0.0001*actual + over*over*0.05) * mult }
			st := capacity.Step{Label: m.mode + "_" + QPSText(req), RequestedRPS: req, ActualRPS: actual,
				Latency:   []capacity.PercentileMS{{Percentile: 50, MS: lat(1)}, {Percentile: 90, MS: lat(1.6)}, {Percentile: 99, MS: lat(3)}},
				Generator: capacity.Saturation{VCPU: 0.2 + actual/4000, Cores: 2, SendDelayP99MS: 0.05},
				Server:    capacity.Saturation{VCPU: 0.3, Cores: 4, SendDelayP99MS: math.NaN()}}
			for k, r := range m.roles {
				// The client's proxy works harder than the server's;
				// ambient's node proxies less than sidecars.
				scale := (1 - 0.25*float64(k)) * map[string]float64{"both-sidecars": 1, "ambient": 0.6}[m.mode]
				st.Proxies = append(st.Proxies, capacity.ProxyUsage{Role: r, Kind: "sidecar",
					VCPU: (0.02 + actual*0.00012 + 0.004*float64(i%2)) * scale, MemMB: (14 + actual*0.0015 + 0.3*float64(i%3)) * scale})
			}
			j := capacity.Judgement{Verdict: capacity.WithinObjectives}
			if p99 := lat(3); p99 > 5 {
				j = capacity.Judgement{Verdict: capacity.ObjectiveBroken, Detail: "p99 " + msLabel(p99) + " ms > 5 ms"}
			}
			if m.mode == "no-mesh" && req == 3000 {
				st.Generator.VCPU = 1.95
				j = capacity.Judgement{Verdict: capacity.GeneratorBound, Detail: "the load generator used 1.95 of its 2 CPUs"}
			}
			if m.mode == "ambient" && i == 3 {
				st.Proxies[0].VCPU = math.NaN()
			}
			c.Steps, c.Judgements = append(c.Steps, st), append(c.Judgements, j)
		}
		a.Curves = append(a.Curves, c)
	}
	nm, bs, amb := &a.Curves[0], &a.Curves[1], &a.Curves[2]
	nm.StopReason = "generator-bound at 3000 rps"
	nm.Knees = []capacity.Knee{{Percentile: 50, Found: true, RPS: 2495}, {Percentile: 90, Why: "the curve does not bend"}, {Percentile: 99, Why: "the curve does not bend"}}
	nm.Capacity = capacity.Capacity{Objective: "all", RPS: 2495, LowerBound: true}
	nm.PerObjective = []capacity.Capacity{{Objective: "p99=5ms", RPS: 2495, LowerBound: true}, {Objective: "p50=1ms", RPS: 2495, LowerBound: true}}

	bs.StopReason = "p99 objective broken at 2500 rps"
	bs.Knees = []capacity.Knee{{Percentile: 50, Found: true, RPS: 1996}, {Percentile: 90, Found: true, RPS: 1996}, {Percentile: 99, Found: true, RPS: 1996}}
	bs.Capacity = capacity.Capacity{Objective: "all", RPS: 1996, NextRPS: 2500}
	bs.PerObjective = []capacity.Capacity{{Objective: "p99=5ms", RPS: 1996, NextRPS: 2500}, {Objective: "p50=1ms", RPS: 2495, NextRPS: 3000}}
	bs.Steps[3].Refined = true
	bs.Fits = []capacity.Fit{
		{Role: RoleClientSidecar, Kind: "sidecar", Metric: capacity.MetricVCPU, Intercept: 0.02, Slope: 0.00012, R2: 0.991, ResidualSD: 0.004, Points: 6, MinRPS: 499, MaxRPS: 2994},
		{Role: RoleServerSidecar, Kind: "sidecar", Metric: capacity.MetricVCPU, Intercept: 0.015, Slope: 0.00009, R2: 0.987, ResidualSD: 0.005, Points: 6, MinRPS: 499, MaxRPS: 2994},
		{Role: RoleClientSidecar, Kind: "sidecar", Metric: capacity.MetricMemMB, Intercept: 14.3, Slope: 0.0015, R2: math.NaN(), ResidualSD: 0.2, Points: 6, MinRPS: 499, MaxRPS: 2994},
	}

	amb.StopReason = "p50 objective broken at 3000 rps"
	amb.Knees = []capacity.Knee{{Percentile: 50, Why: "too few steps before the objective broke"}, {Percentile: 90, Found: true, RPS: 2495}, {Percentile: 99, Found: true, RPS: 2495}}
	amb.Capacity = capacity.Capacity{Objective: "all", RPS: 2495, NextRPS: 3000}
	amb.PerObjective = []capacity.Capacity{{Objective: "p99=5ms", RPS: 2495, NextRPS: 3000}, {Objective: "p50=1ms", NotMet: true, NextRPS: 500}}
	amb.Fits = []capacity.Fit{
		{Role: "client-node-proxy", Kind: "node proxy", Metric: capacity.MetricVCPU, Intercept: 0.012, Slope: 0.000072, R2: 0.95, Points: 5, MinRPS: 499, MaxRPS: 2994},
	}

	// A knee sits on its step, as Analyze finds it.
	for i := range a.Curves {
		c := &a.Curves[i]
		for k, kn := range c.Knees {
			for _, st := range c.Steps {
				if kn.Found && st.ActualRPS == kn.RPS {
					c.Knees[k].MS = stepMS(st, kn.Percentile)
				}
			}
		}
	}
	a.Losses = []capacity.Loss{
		{Mode: "both-sidecars", RPS: 499, Percent: 20, Approximate: true, Note: "the baseline's capacity is a lower bound, so at least this much is lost"},
		{Mode: "ambient", RPS: 0, Percent: 0, Approximate: true},
	}
	a.Advice = []capacity.Advice{
		{Mode: "both-sidecars", Kind: "sidecar", VCPU: 0.33, MemMB: 18.5, MarginVCPU: 0.01, MarginMB: 0.6, Extrapolated: false, MetHere: false,
			Evidence: "measured up to 2994 rps on this machine; the objectives did not hold at 2500 rps here"},
		{Mode: "ambient", Kind: "node proxy", VCPU: 0.34, MemMB: math.NaN(), MarginVCPU: 0.02, MarginMB: math.NaN(), Extrapolated: true, MetHere: true,
			Evidence: "measured up to 2000 rps on this machine; beyond that it is extrapolated"},
	}
	return a
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
	doc := sweepReportTo(t, sweepAnalysis(), os.Getenv("MESHPERF_SWEEP_REPORT"))
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
	wantCPU := "both-sidecars client-sidecar, R² 0.99,both-sidecars server-sidecar, R² 0.99,ambient client-node-proxy, R² 0.95,ambient server-node-proxy"
	if got := strings.Join(byKind["sweep-cpu"].series, ","); got != wantCPU {
		t.Errorf("CPU chart's lines %q, want %q", got, wantCPU)
	}
	if got := strings.Join(byKind["sweep-memory"].series, ","); !strings.Contains(got, "both-sidecars client-sidecar, R² n/a") {
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
	doc := sweepReport(t, sweepAnalysis())
	checkRows(t, "capacity", tableRows(t, doc, "sweep-capacity"),
		"mode|capacity, all objectives|p99=5ms|p50=1ms|lost to the mesh (rps)|lost (%)|why the sweep stopped",
		"no-mesh|≥ 2495 rps|≥ 2495 rps|≥ 2495 rps|baseline||generator-bound at 3000 rps",
		"both-sidecars|1996 rps|1996 rps|2495 rps|≈ 499|≈ 20.0%|p99 objective broken at 2500 rps",
		"ambient|2495 rps|2495 rps|not met at 500 rps|≈ 0|≈ 0.0%|p50 objective broken at 3000 rps")
	if !strings.Contains(doc, "Objectives: p99=5ms, p50=1ms; target rate 2500 rps; baseline no-mesh; 4 CPUs.") {
		t.Error("the line above the capacity table does not give the objectives and target")
	}
	if !strings.Contains(doc, "both-sidecars: the baseline&#39;s capacity is a lower bound") {
		t.Error("the approximate loss's note is missing")
	}
	checkRows(t, "knees", tableRows(t, doc, "sweep-knees"),
		"mode|P50 knee|P90 knee|P99 knee",
		"no-mesh|at 2495 rps (0.450 ms)|none: the curve does not bend|none: the curve does not bend",
		"both-sidecars|at 1996 rps (0.892 ms)|at 1996 rps (1.43 ms)|at 1996 rps (2.68 ms)",
		"ambient|none: too few steps before the objective broke|at 2495 rps (1.66 ms)|at 2495 rps (3.10 ms)")
	checkRows(t, "advice", tableRows(t, doc, "sweep-advice"),
		"mode|proxy|vCPU|margin (vCPU)|MB|margin (MB)|extrapolated|objectives met here|evidence",
		"both-sidecars|sidecar|0.330|0.010|18.5|0.6|no|no|measured up to 2994 rps on this machine; the objectives did not hold at 2500 rps here",
		"ambient|node proxy|0.340|0.020|-|-|yes|yes|measured up to 2000 rps on this machine; beyond that it is extrapolated")
	// Steps: both-sidecars' refined step marked, no-mesh's generator-bound
	// one shaded with its verdict, ambient's NaN vCPU no obstacle.
	if !strings.Contains(doc, "<td>2000 <span class=\"note\">refined</span></td>") {
		t.Error("the refined step is not marked")
	}
	if !strings.Contains(doc, `<tr class="excluded"><td>3000</td><td>2994</td>`) ||
		!strings.Contains(doc, "generator-bound</td><td class=\"l\">the load generator used 1.95 of its 2 CPUs</td>") {
		t.Error("the generator-bound step is not shown as such")
	}
	if !strings.Contains(doc, "<td>1.950 of 2</td>") {
		t.Error("the generator's CPU is not shown against its cores")
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
	a := sweepAnalysis()
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
