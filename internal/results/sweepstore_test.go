package results

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
)

// sampleSweep is a two-mode sweep's analysis with the unknowns a real one
// has: a server's send delay, an unknown vCPU, a flat fit's R².
func sampleSweep(runID string) Sweep {
	nan := math.NaN()
	step := func(rps int, p99 float64, proxies ...capacity.ProxyUsage) capacity.Step {
		return capacity.Step{Label: fmt.Sprintf("%s_qps_%d", runID, rps), RequestedRPS: rps, ActualRPS: float64(rps) * 0.99,
			Latency:   []capacity.PercentileMS{{Percentile: 50, MS: p99 / 3}, {Percentile: 95, MS: nan}, {Percentile: 99, MS: p99}},
			Generator: capacity.Saturation{VCPU: 0.4, Cores: 2, SendDelayP99MS: 0.2},
			Server:    capacity.Saturation{VCPU: nan, Cores: 2, SendDelayP99MS: nan},
			Proxies:   proxies}
	}
	p99 := capacity.Objective{Percentile: 99, Limit: 5 * time.Millisecond}
	return Sweep{RunID: runID, Scenario: "sweep", Analysis: capacity.Analysis{
		Objectives: capacity.Objectives{p99}, TargetRPS: 3000, Baseline: ModeNoMesh, CPUs: 2,
		Curves: []capacity.Curve{
			{Mode: ModeNoMesh, Steps: []capacity.Step{step(1000, 1), step(2000, 7)},
				Judgements: []capacity.Judgement{{Verdict: capacity.WithinObjectives},
					{Verdict: capacity.ObjectiveBroken, Detail: "p99 7 ms > 5 ms", Broken: []capacity.Objective{p99}}},
				StopReason: "objective broken",
				Knees:      []capacity.Knee{{Percentile: 50, Why: "too few steps"}, {Percentile: 99, Found: true, RPS: 990, MS: 1}},
				Capacity:   capacity.Capacity{Objective: "all", RPS: 990, NextRPS: 2000}},
			{Mode: "both-sidecars", Steps: []capacity.Step{
				step(1000, 2, capacity.ProxyUsage{Role: RoleClientSidecar, Kind: ProxySidecar, VCPU: 0.1, MemMB: 12},
					capacity.ProxyUsage{Role: RoleServerSidecar, Kind: ProxySidecar, VCPU: nan, MemMB: 13})},
				Judgements: []capacity.Judgement{{Verdict: capacity.WithinObjectives}},
				StopReason: "end of range",
				Capacity:   capacity.Capacity{Objective: "all", RPS: 990, LowerBound: true},
				Fits: []capacity.Fit{{Role: RoleClientSidecar, Kind: ProxySidecar, Metric: capacity.MetricMemMB,
					Intercept: 12, Slope: 0, R2: nan, Points: 1, MinRPS: 990, MaxRPS: 990}}},
		},
		Losses: []capacity.Loss{{Mode: "both-sidecars", RPS: 0, Percent: 0, Approximate: true, Note: "the mode's capacity is a lower bound"}},
		Advice: []capacity.Advice{{Mode: "both-sidecars", Kind: ProxySidecar, VCPU: 0.5, MemMB: 16, MarginVCPU: nan,
			MarginMB: 1, Extrapolated: true, Evidence: "measured up to 990 rps on this machine; beyond that it is extrapolated"}},
	}}
}

func TestSweepStoreRoundTrip(t *testing.T) { forEachDialect(t, testSweepStoreRoundTrip) }

func testSweepStoreRoundTrip(t *testing.T, db string, _ conn) {
	st := openStore(t, db)
	if sw, err := st.Sweep("none"); sw != nil || err != nil {
		t.Fatalf("Sweep of an invocation without one = %+v, %v; want nil, nil", sw, err)
	}
	want := sampleSweep("sw1")
	if err := st.InsertSweep(want); err != nil {
		t.Fatal(err)
	}
	got, err := st.Sweep("sw1")
	if err != nil || got == nil {
		t.Fatalf("Sweep = %v, %v", got, err)
	}
	if !sameNaN(*got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", *got, want)
	}
	// The unknowns are NaN again, not 0.
	a := got.Analysis
	if !math.IsNaN(a.Curves[1].Fits[0].R2) || !math.IsNaN(a.Curves[0].Steps[0].Server.VCPU) || !math.IsNaN(a.Advice[0].MarginVCPU) ||
		a.Curves[1].Fits[0].MaxRPS != 990 {
		t.Errorf("unknowns or the fit's span not read back: %+v %+v", a.Curves[1].Fits[0], a.Advice[0])
	}
	// One sweep per invocation: a second is refused, naming the run, and
	// the first stays.
	second := sampleSweep("sw1")
	second.Scenario = "other"
	if err := st.InsertSweep(second); err == nil || !strings.Contains(err.Error(), "sw1") {
		t.Errorf("second sweep for sw1: %v; want an error naming it", err)
	}
	if got, _ := st.Sweep("sw1"); got == nil || got.Scenario != "sweep" {
		t.Errorf("after the refused insert: %+v", got)
	}
	all, err := st.Sweeps()
	if err != nil || len(all) != 1 || all[0].RunID != "sw1" {
		t.Errorf("Sweeps = %+v, %v", all, err)
	}
}

func TestStoreUpgradeFromSchema7(t *testing.T) { forEachDialect(t, testStoreUpgradeFromSchema7) }

func testStoreUpgradeFromSchema7(t *testing.T, db string, raw conn) {
	// A schema-7 store with one run: opening it adds the send delay (NULL,
	// so NaN, for the old run) and the sweeps' table.
	schemaAt(t, raw, 7, oldRun)
	st := openStore(t, db)
	if v, _ := st.Version(); v != SchemaVersion {
		t.Fatalf("version %d after the upgrade, want %d", v, SchemaVersion)
	}
	runs, err := st.Runs(Filter{})
	if err != nil || len(runs) != 1 || runs[0].Latency.P90 != 0.25 || !math.IsNaN(runs[0].SendDelayP99) {
		t.Fatalf("after the upgrade: %+v, %v; want the old run with an unknown send delay", runs, err)
	}
	if err := st.InsertSweep(sampleSweep("old")); err != nil {
		t.Fatal(err)
	}
	if sw, err := st.Sweep("old"); err != nil || sw == nil || len(sw.Analysis.Curves) != 2 {
		t.Fatalf("sweep after the upgrade: %+v, %v", sw, err)
	}
}
