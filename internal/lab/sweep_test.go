package lab

import (
	"context"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// sweepScenario is no mesh and both sidecars at 16 connections, 2 s
// steps. Each connection keeps one request in flight, so the connections
// cap the rate at 16 / latency: with sidecars taking up to 10 ms on a busy
// machine that is 1600 rps, twice the tests' highest rate, so that the
// ladder is climbed whatever the machine.
func sweepScenario(t *testing.T) *scenario.Scenario {
	s := tinyScenario(t, []scenario.Mode{scenario.NoMesh, scenario.BothSidecars}, []int{16})
	s.Cooldown = 0
	return s
}

func sweep(t *testing.T, s *scenario.Scenario, opts SweepOptions) (*Report, string) {
	return invokeConfig(t, Config{Scenario: s, Network: testNetwork(t)}, func(ctx context.Context, cfg Config) (*Report, error) {
		return Sweep(ctx, cfg, opts)
	})
}

// A sweep under an objective every step meets climbs the whole ladder in
// each mode, no mesh first, stores every step as a run and the analysis
// beside them, and fits both sidecars' CPU against the rate.
func TestSweepClimbsTheLadder(t *testing.T) {
	rates := []int{100, 200, 400, 800}
	objs := capacity.Objectives{{Percentile: 99, Limit: 500 * time.Millisecond}}
	rep, out := sweep(t, sweepScenario(t), SweepOptions{Rates: rates, Refine: 2, Objectives: objs})
	if len(rep.Outcomes) != 2*len(rates) {
		t.Fatalf("%d runs, want %d (every rate in both modes)", len(rep.Outcomes), 2*len(rates))
	}
	for i, o := range rep.Outcomes {
		mode, rate := []string{"no-mesh", "both-sidecars"}[i/len(rates)], rates[i%len(rates)]
		label := scenario.RunSpec{Mode: scenario.Mode(mode), QPS: rate, Connections: 16, PayloadSize: 1024}.Label(rep.RunID)
		if r := o.Run; r.Failed || r.Mode != mode || r.RequestedQPS != rate || r.Repetition != 1 || r.Connections != 16 || r.Label != label {
			t.Errorf("step %d: %s mode %s %d qps rep %d, failed %v (%s); want %s at %d", i, r.Label, r.Mode, r.RequestedQPS,
				r.Repetition, r.Failed, r.FailureReason, mode, rate)
		}
	}
	// Whether the generator limited a step is read from its own CPU and
	// send delay: both must be measured for every step.
	for _, o := range rep.Outcomes {
		if g := results.StepOf(o.Run, runtime.NumCPU()).Generator; math.IsNaN(g.VCPU) || math.IsNaN(g.SendDelayP99MS) {
			t.Errorf("%s: the load generator's vCPU %v, send delay p99 %v ms; want both measured", o.Run.Label, g.VCPU, g.SendDelayP99MS)
		}
	}
	if !strings.Contains(out, "sweep both-sidecars: step 4, 800 rps") {
		t.Errorf("no progress line for the last step")
	}
	store, runs := storedRuns(t, rep)
	if len(runs) != len(rep.Outcomes) {
		t.Fatalf("store holds %d runs of the sweep, want %d", len(runs), len(rep.Outcomes))
	}
	stored, err := store.Sweep(rep.RunID)
	if err != nil || stored == nil {
		t.Fatalf("no sweep stored: %v", err)
	}
	a := stored.Analysis
	if len(a.Curves) != 2 || a.Curves[0].Mode != "no-mesh" || a.Curves[1].Mode != "both-sidecars" || a.Baseline != "no-mesh" {
		t.Fatalf("stored analysis has curves %v, want no-mesh then both-sidecars", curveModes(a))
	}
	for _, c := range a.Curves {
		if len(c.Steps) != len(rates) || !strings.Contains(c.StopReason, "end of the range") {
			t.Errorf("%s: %d steps, stop %q; want %d and the end of the range", c.Mode, len(c.Steps), c.StopReason, len(rates))
		}
	}
	for _, role := range []string{results.RoleClientSidecar, results.RoleServerSidecar} {
		i := slices.IndexFunc(a.Curves[1].Fits, func(f capacity.Fit) bool { return f.Role == role && f.Metric == capacity.MetricVCPU })
		if i < 0 || !(a.Curves[1].Fits[i].Slope > 0) {
			t.Errorf("both-sidecars: no rising vCPU fit for %s in %+v", role, a.Curves[1].Fits)
		}
	}
	if rep.BaselineNotMet {
		t.Errorf("the baseline is said to miss a 500 ms p99")
	}
}

// An objective no step can meet stops the sweep at no mesh's first step:
// no mode through a mesh can meet what the baseline cannot. What ran is
// still stored and analysed. With two repetitions the step is both runs,
// stored apart, judged on their median.
func TestSweepBaselineNotMet(t *testing.T) {
	objs := capacity.Objectives{{Percentile: 50, Limit: time.Microsecond}}
	s := sweepScenario(t)
	s.Repetitions = 2
	rep, out := sweep(t, s, SweepOptions{Rates: []int{200, 400, 800, 1600}, Refine: 2, Objectives: objs})
	if len(rep.Outcomes) != 2 || !rep.BaselineNotMet {
		t.Fatalf("%d runs, baseline not met %v; want no-mesh's first step's two runs, and the baseline said not to meet p50=1µs",
			len(rep.Outcomes), rep.BaselineNotMet)
	}
	for i, o := range rep.Outcomes {
		if r := o.Run; r.Mode != "no-mesh" || r.RequestedQPS != 200 || r.Repetition != i+1 {
			t.Errorf("run %d: %s at %d qps, repetition %d; want no-mesh at 200, repetition %d", i, r.Mode, r.RequestedQPS, r.Repetition, i+1)
		}
	}
	for _, want := range []string{"median of 2 runs: ", "no-mesh: cannot meet p50=1µs even at the lowest rate, 200 rps (p50 ",
		"the baseline (no-mesh) cannot meet the objectives"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	store, runs := storedRuns(t, rep)
	stored, err := store.Sweep(rep.RunID)
	if err != nil || stored == nil || len(stored.Analysis.Curves) != 1 || len(runs) != 2 {
		t.Fatalf("stored %d runs and sweep %+v (%v); want both runs and no-mesh's one curve", len(runs), stored, err)
	}
	c := stored.Analysis.Curves[0]
	if !strings.Contains(c.StopReason, "objective broken at 200 rps") || len(c.Steps) != 1 || c.Steps[0].Repetitions != 2 {
		t.Errorf("curve stopped %q with steps %+v; want one step, the median of 2 runs, stopped by the objective at 200 rps", c.StopReason, c.Steps)
	}
}

// The sweep's decision once a mode's search ended, with capacity's own
// judgement and search: a mode missing the objectives at its lowest rate
// is said to, and when it is the baseline the sweep stops; a mode that
// met them at first, or whose generator was to blame, is not.
func TestNotMetAtStart(t *testing.T) {
	objs := capacity.Objectives{{Percentile: 99, Limit: 5 * time.Millisecond}}
	step := func(rps int, p99, sendDelay float64) capacity.Step {
		s := capacity.Step{RequestedRPS: rps, ActualRPS: float64(rps),
			Generator: capacity.Saturation{VCPU: 0.2, Cores: 4, SendDelayP99MS: sendDelay}, Server: capacity.Saturation{VCPU: 0.2, Cores: 4}}
		for _, p := range capacity.Percentiles {
			s.Latency = append(s.Latency, capacity.PercentileMS{Percentile: p, MS: min(p99, 1)})
		}
		s.Latency[slices.IndexFunc(s.Latency, func(pm capacity.PercentileMS) bool { return pm.Percentile == 99 })].MS = p99
		return s
	}
	searched := func(steps ...capacity.Step) *capacity.Search {
		s := capacity.NewSearch([]int{500, 1000, 2000}, 0)
		for _, st := range steps {
			rps, _, ok := s.Next()
			if !ok || rps != st.RequestedRPS {
				t.Fatalf("search gave %d (%v), the test runs %d", rps, ok, st.RequestedRPS)
			}
			s.Record(rps, capacity.Judge(st, objs))
		}
		return s
	}
	slow := step(500, 7.2, 0.1)
	// The generator behind its schedule, missing the rate: its doing.
	behind := step(500, 7.2, 30)
	behind.ActualRPS = 400
	for _, c := range []struct {
		mode     scenario.Mode
		steps    []capacity.Step
		line     string
		stopping bool
	}{
		{scenario.NoMesh, []capacity.Step{slow}, "no-mesh: cannot meet p99=5ms even at the lowest rate, 500 rps (p99 7.2 ms > 5ms)", true},
		{scenario.Ambient, []capacity.Step{slow}, "ambient: cannot meet p99=5ms even at the lowest rate, 500 rps (p99 7.2 ms > 5ms)", false},
		{scenario.NoMesh, []capacity.Step{step(500, 2, 0.1), step(1000, 7.2, 0.1)}, "", false},
		{scenario.NoMesh, []capacity.Step{behind}, "", false},
	} {
		line, stop := notMetAtStart(c.mode, searched(c.steps...), c.steps, objs)
		if line != c.line || stop != c.stopping {
			t.Errorf("%s after %d steps: %q, stop %v; want %q, stop %v", c.mode, len(c.steps), line, stop, c.line, c.stopping)
		}
	}
}

// Every percentile an objective may name is one the load generator reports
// exactly in a sweep's step, so that no verdict rests on interpolation.
func TestSweepStepsReportObjectivePercentiles(t *testing.T) {
	spec := sweepScenario(t).SpecAt(scenario.BothSidecars, 4, 1000, 1)
	args := spec.LoadArgs("label", "out.json")
	i := slices.Index(args, "-p")
	if i < 0 || i+1 == len(args) {
		t.Fatalf("no -p in the load generator's arguments %q", args)
	}
	for _, p := range capacity.Percentiles {
		if !slices.Contains(strings.Split(args[i+1], ","), strconv.FormatFloat(p, 'f', -1, 64)) {
			t.Errorf("-p %s lacks %v", args[i+1], p)
		}
	}
}

func curveModes(a capacity.Analysis) []string {
	var modes []string
	for _, c := range a.Curves {
		modes = append(modes, c.Mode)
	}
	return modes
}
