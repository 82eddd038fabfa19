package capacity

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// meshSteps is a both-sidecars sweep: p99 rises past 5 ms at 4000 rps,
// refined at 3500 (held) and 3800 (broken); the client sidecar's vCPU is
// 0.05 + 0.2 per 1000 rps and its memory 30 + 2 MiB per 1000 rps, the
// server sidecar's a little less.
func meshSteps() []Step {
	var steps []Step
	for _, r := range []struct {
		rps     int
		p99     float64
		refined bool
	}{{1000, 1.2, false}, {2000, 1.4, false}, {3000, 2, false}, {4000, 6.12, false}, {3500, 3, true}, {3800, 5.5, true}} {
		s := step(r.rps, 0.4, 0.9, r.p99)
		s.Refined = r.refined
		x := float64(r.rps)
		s.Proxies = []ProxyUsage{
			{Role: "client-sidecar", Kind: "sidecar", VCPU: 0.05 + 0.0002*x, MemMB: 30 + 0.002*x},
			{Role: "server-sidecar", Kind: "sidecar", VCPU: 0.04 + 0.00015*x, MemMB: 28 + 0.002*x},
		}
		steps = append(steps, s)
	}
	return steps
}

// baselineSteps is a no-mesh sweep the load generator stopped at 8000 rps.
func baselineSteps() []Step {
	var steps []Step
	for rps := 1000; rps <= 8000; rps += 1000 {
		steps = append(steps, step(rps, 0.2, 0.4, 0.8))
	}
	steps[7].Generator.VCPU = 1.95
	steps[7].ActualRPS = 7400
	return steps
}

func sweepInput(t *testing.T, target int) Input {
	return Input{
		Objectives: objectives(t, "p99=5ms,p50=1ms"),
		TargetRPS:  target,
		Baseline:   "no-mesh",
		CPUs:       2,
		Modes: []ModeSteps{
			{Mode: "no-mesh", Steps: baselineSteps(), StopReason: "generator-bound at 8000 rps"},
			{Mode: "both-sidecars", Steps: meshSteps(), StopReason: "objective broken at 4000 rps: p99 6.12 ms > 5ms"},
		},
	}
}

func TestAnalyzeCapacityAndLosses(t *testing.T) {
	a := Analyze(sweepInput(t, 0))
	base, mesh := a.Curves[0], a.Curves[1]
	if want := (Capacity{Objective: "all", RPS: 7000, LowerBound: true}); base.Capacity != want {
		t.Errorf("no-mesh capacity %+v; want %+v", base.Capacity, want)
	}
	if want := (Capacity{Objective: "all", RPS: 3500, NextRPS: 3800}); mesh.Capacity != want {
		t.Errorf("both-sidecars capacity %+v; want %+v", mesh.Capacity, want)
	}
	// p99 alone gives way where all do; p50 never does, so it is a lower bound.
	want := []Capacity{{Objective: "p99=5ms", RPS: 3500, NextRPS: 3800}, {Objective: "p50=1ms", RPS: 4000, LowerBound: true}}
	if len(mesh.PerObjective) != 2 || mesh.PerObjective[0] != want[0] || mesh.PerObjective[1] != want[1] {
		t.Errorf("per objective %+v; want %+v", mesh.PerObjective, want)
	}
	if mesh.Steps[4].RequestedRPS != 3800 || mesh.Judgements[4].Verdict != ObjectiveBroken {
		t.Errorf("steps not sorted by requested rate with their judgements: %+v", mesh.Steps)
	}
	if len(a.Losses) != 1 {
		t.Fatalf("losses %+v; want one", a.Losses)
	}
	l := a.Losses[0]
	if l.Mode != "both-sidecars" || l.RPS != 3500 || l.Percent != 50 || !l.Approximate ||
		!strings.Contains(l.Note, "no-mesh's capacity is a lower bound (the load generator was the limit), so the loss is at least 3500 rps") {
		t.Errorf("loss %+v", l)
	}

	// No baseline measured, or none at all: no losses.
	in := sweepInput(t, 0)
	in.Modes[0].Steps = nil
	if l := Analyze(in).Losses; len(l) != 0 {
		t.Errorf("losses against an empty baseline: %+v", l)
	}
	in.Modes = in.Modes[1:]
	if l := Analyze(in).Losses; len(l) != 0 {
		t.Errorf("losses without a baseline: %+v", l)
	}
}

func TestCapacityNotMetAndWithoutObjectives(t *testing.T) {
	steps := []Step{step(1000, 2, 4, 9), step(2000, 2, 4, 12)}
	c := Analyze(Input{Objectives: objectives(t, "p99=5ms"), Modes: []ModeSteps{{Mode: "m", Steps: steps}}}).Curves[0]
	if want := (Capacity{Objective: "all", NextRPS: 1000, NotMet: true}); c.Capacity != want {
		t.Errorf("capacity %+v; want %+v", c.Capacity, want)
	}

	// Without objectives, the capacity is where the rate stopped being kept.
	steps = []Step{step(1000, 2, 4, 9), step(2000, 2, 4, 12), step(3000, 2, 4, 30), step(4000, 2, 4, 90)}
	steps[3].ActualRPS = 3100
	steps[0].Failed = true // skipped, not a miss
	c = Analyze(Input{Modes: []ModeSteps{{Mode: "m", Steps: steps}}}).Curves[0]
	if want := (Capacity{Objective: "all", RPS: 3000, NextRPS: 4000}); c.Capacity != want || len(c.PerObjective) != 0 {
		t.Errorf("capacity %+v, per objective %+v; want %+v", c.Capacity, c.PerObjective, want)
	}
	// Never saturated: a lower bound.
	c = Analyze(Input{Modes: []ModeSteps{{Mode: "m", Steps: steps[:3]}}}).Curves[0]
	if !c.Capacity.LowerBound || c.Capacity.RPS != 3000 {
		t.Errorf("capacity %+v; want ≥ 3000", c.Capacity)
	}
}

func TestAdvice(t *testing.T) {
	a := Analyze(sweepInput(t, 5000))
	if len(a.Advice) != 1 {
		t.Fatalf("advice %+v; want one, for both-sidecars' sidecars", a.Advice)
	}
	adv := a.Advice[0]
	// The client sidecar is the larger: 0.05 + 0.2×5 = 1.05 vCPU, 30 + 2×5 = 40 MiB.
	if adv.Mode != "both-sidecars" || adv.Kind != "sidecar" || math.Abs(adv.VCPU-1.05) > 1e-9 ||
		math.Abs(adv.MemMB-40) > 1e-9 || !adv.Extrapolated || adv.MetHere || adv.MarginVCPU > 1e-9 {
		t.Errorf("advice %+v", adv)
	}
	for _, want := range []string{
		"Measured from 1000 to 4000 rps on this 2-CPU machine; beyond 4000 rps it is extrapolated (vCPU fit R² 1.00",
		"The objectives held up to 3500 rps here, below the 5000 rps target: this machine could not carry the target through both-sidecars within p99=5ms,p50=1ms.",
	} {
		if !strings.Contains(adv.Evidence, want) {
			t.Errorf("evidence %q lacks %q", adv.Evidence, want)
		}
	}

	// Below the highest rate, met here; what was measured at higher rates
	// (0.85 vCPU, 38 MiB at 4000) does not raise the advice for 500.
	adv = Analyze(sweepInput(t, 500)).Advice[0]
	if adv.Extrapolated || !adv.MetHere || math.Abs(adv.VCPU-0.15) > 1e-9 || math.Abs(adv.MemMB-31) > 1e-9 ||
		!strings.Contains(adv.Evidence, "The objectives held at the 500 rps target here.") {
		t.Errorf("advice at 500 rps %+v; want the fit's 0.15 vCPU and 31 MiB, met here", adv)
	}

	// Never below what a proxy was measured using at or under the target.
	in0 := sweepInput(t, 2500)
	in0.Modes[1].Steps[1].Proxies[0].VCPU = 0.9 // at 2000 rps, far above the line
	adv = Analyze(in0).Advice[0]
	if adv.VCPU < 0.9 {
		t.Errorf("advice at 2500 rps %+v; want at least the 0.9 vCPU measured at 2000", adv)
	}

	// Scatter widens the margin.
	in := sweepInput(t, 3000)
	in.Modes[1].Steps[1].Proxies[0].VCPU += 0.1
	adv = Analyze(in).Advice[0]
	if adv.MarginVCPU <= 0 || !adv.MetHere || adv.Extrapolated {
		t.Errorf("advice with scatter %+v; want a margin", adv)
	}

	// No memory measured: no memory fit, said so.
	in = sweepInput(t, 5000)
	for i := range in.Modes[1].Steps {
		for j := range in.Modes[1].Steps[i].Proxies {
			in.Modes[1].Steps[i].Proxies[j].MemMB = math.NaN()
		}
	}
	adv = Analyze(in).Advice[0]
	if !math.IsNaN(adv.MemMB) || !strings.Contains(adv.Evidence, "no memory fit") {
		t.Errorf("advice without memory %+v", adv)
	}
}

func TestAnalyzeOddInputsDoNotPanic(t *testing.T) {
	nanStep := Step{RequestedRPS: 100, ActualRPS: nan, ErrorPercent: nan,
		Latency:   []PercentileMS{{50, nan}, {99, nan}},
		Generator: Saturation{nan, nan, nan}, Server: Saturation{nan, nan, nan},
		Proxies: []ProxyUsage{{Role: "waypoint", Kind: "waypoint", VCPU: nan, MemMB: nan}}}
	inputs := map[string]Input{
		"empty":         {},
		"empty mode":    {Baseline: "no-mesh", TargetRPS: 100, Modes: []ModeSteps{{Mode: "no-mesh"}, {Mode: "ambient"}}},
		"NaN step":      {Objectives: objectives(t, "p99=1ms"), TargetRPS: 100, Modes: []ModeSteps{{Mode: "ambient", Steps: []Step{nanStep, nanStep}}}},
		"zero rates":    {TargetRPS: 1, Modes: []ModeSteps{{Mode: "m", Steps: []Step{{}, {}, {}, {}, {}}}}},
		"one step":      {TargetRPS: 10, Baseline: "m", Modes: []ModeSteps{{Mode: "m", Steps: meshSteps()[:1]}}},
		"all generator": {TargetRPS: 10, Modes: []ModeSteps{{Mode: "m", Steps: []Step{{Generator: Saturation{VCPU: 2, Cores: 2}}}}}},
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			a := Analyze(in)
			if len(a.Curves) != len(in.Modes) {
				t.Errorf("%d curves for %d modes", len(a.Curves), len(in.Modes))
			}
			var b bytes.Buffer
			if err := a.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.String(), "NaN") || strings.Contains(b.String(), "%!") {
				t.Errorf("report shows a raw NaN or a format error:\n%s", b.String())
			}
		})
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := Analyze(sweepInput(t, 5000)).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Capacity sweep within p99=5ms,p50=1ms",
		"both-sidecars — objective broken at 4000 rps: p99 6.12 ms > 5ms",
		"3800*",
		"at 3800 rps: p99 5.5 ms > 5ms",
		"8000  7400",
		"8000  7400    0.2     0.4     0.8     0         generator-bound",
		"at 8000 rps: load generator saturated: 1.95 of 2 vCPU",
		"knee p50: none, the curve does not bend within the measured range (p50 0.2 → 0.2 ms)",
		"client-sidecar vCPU = 0.05 + 0.2 per 1000 rps (R² 1.00, 6 steps, 1000–4000 rps)",
		"client-sidecar memory = 30 + 2 MiB per 1000 rps",
		"no-mesh        ≥ 7000 rps",
		"both-sidecars  3500 rps",
		"lost vs no-mesh",
		"~3500 rps (~50%)",
		"no-mesh's capacity is a lower bound",
		"Sizing for 5000 rps, per proxy",
		"both-sidecars sidecar: 1.05 vCPU, 40 MiB [extrapolated, not met here]",
		"this machine could not carry the target",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
	if t.Failed() {
		t.Log("\n" + out)
	}
}

func TestCapacityString(t *testing.T) {
	for _, c := range []struct {
		in   Capacity
		want string
	}{
		{Capacity{RPS: 3200, NextRPS: 3600}, "3200 rps"},
		{Capacity{RPS: 3199.6, LowerBound: true}, "≥ 3200 rps"},
		{Capacity{RPS: 12.34}, "12.3 rps"},
		{Capacity{NotMet: true, NextRPS: 500}, "not met at 500 rps"},
		{Capacity{NotMet: true}, "not met"},
		{Capacity{LowerBound: true}, "unknown"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.in, got, c.want)
		}
	}
}

// A sweep without its baseline (meshperf load's single target) has no
// column of capacity lost against it.
func TestWriteTextWithoutBaselineHasNoLossColumn(t *testing.T) {
	in := sweepInput(t, 0)
	in.Modes = in.Modes[1:]
	var b bytes.Buffer
	if err := Analyze(in).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "lost vs") || !strings.Contains(out, "both-sidecars  3500 rps") {
		t.Errorf("report without its baseline:\n%s\nwant the capacity table without a loss column", out)
	}
}

func TestWriteTextSaysStepsAreMedians(t *testing.T) {
	in := sweepInput(t, 0)
	for i := range in.Modes[1].Steps {
		in.Modes[1].Steps[i].Repetitions = 3
	}
	var b bytes.Buffer
	if err := Analyze(in).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Count(out, "each step the median of 3 runs") != 1 {
		t.Errorf("report:\n%s\nwant both-sidecars (only) said to be medians of 3 runs", out)
	}
}
