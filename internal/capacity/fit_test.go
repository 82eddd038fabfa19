package capacity

import (
	"math"
	"testing"
)

func TestFitLine(t *testing.T) {
	// An exact line: vCPU = 0.05 + 0.0002 × rps.
	x := []float64{1000, 2000, 3000, 4000}
	y := []float64{0.25, 0.45, 0.65, 0.85}
	f, ok := fitLine(x, y)
	if !ok || math.Abs(f.Slope-0.0002) > 1e-12 || math.Abs(f.Intercept-0.05) > 1e-9 ||
		math.Abs(f.R2-1) > 1e-9 || f.ResidualSD > 1e-9 || f.Points != 4 || f.MinRPS != 1000 || f.MaxRPS != 4000 {
		t.Errorf("exact line: %+v, %v", f, ok)
	}

	// Noisy: residuals ±0.05 alternate, so the scatter shows in R² and SD.
	y = []float64{0.30, 0.40, 0.70, 0.80}
	f, _ = fitLine(x, y)
	if f.R2 >= 0.99 || f.R2 <= 0.8 || f.ResidualSD <= 0.01 {
		t.Errorf("noisy line: %+v; want 0.8 < R² < 0.99 and a residual SD", f)
	}
	wantSD := math.Sqrt(sumSquares(x, y, f) / 2)
	if math.Abs(f.ResidualSD-wantSD) > 1e-12 {
		t.Errorf("residual SD %v; want %v (n−2 denominator)", f.ResidualSD, wantSD)
	}

	// Flat: R² says nothing.
	f, ok = fitLine(x, []float64{30, 30, 30, 30})
	if !ok || !math.IsNaN(f.R2) || f.Slope != 0 || f.Intercept != 30 {
		t.Errorf("flat: %+v", f)
	}
	// Two points: the line passes through both.
	f, ok = fitLine(x[:2], y[:2])
	if !ok || f.ResidualSD != 0 {
		t.Errorf("two points: %+v, %v", f, ok)
	}
	for _, xs := range [][]float64{{1000}, {1000, 1000}} {
		if _, ok := fitLine(xs, make([]float64, len(xs))); ok {
			t.Errorf("fit through %v: want none", xs)
		}
	}
}

func sumSquares(x, y []float64, f Fit) float64 {
	var s float64
	for i := range x {
		r := y[i] - f.At(x[i])
		s += r * r
	}
	return s
}

func TestFitProxies(t *testing.T) {
	var steps []Step
	var judgements []Judgement
	for i := 1; i <= 5; i++ {
		s := step(1000*i, 0.5, 1, 2)
		s.Proxies = []ProxyUsage{
			{Role: "client-sidecar", Kind: "sidecar", VCPU: 0.1 * float64(i), MemMB: 40},
			{Role: "server-sidecar", Kind: "sidecar", VCPU: 0.08 * float64(i), MemMB: math.NaN()},
		}
		steps = append(steps, s)
		judgements = append(judgements, Judgement{Verdict: WithinObjectives})
	}
	steps[4].Proxies[0].VCPU = 9 // the generator was the limit: not counted
	judgements[4].Verdict = GeneratorBound
	steps[3].Proxies[1].VCPU = math.NaN()

	fits := fitProxies(steps, judgements)
	if len(fits) != 3 {
		t.Fatalf("fits %+v; want client vCPU and memory, server vCPU (its memory unknown)", fits)
	}
	cpu := fits[0]
	if cpu.Role != "client-sidecar" || cpu.Metric != MetricVCPU || cpu.Points != 4 || math.Abs(cpu.Slope-0.0001) > 1e-12 {
		t.Errorf("client vCPU fit %+v", cpu)
	}
	if fits[1].Metric != MetricMemMB || !math.IsNaN(fits[1].R2) {
		t.Errorf("client memory fit %+v; want flat", fits[1])
	}
	if fits[2].Role != "server-sidecar" || fits[2].Points != 3 {
		t.Errorf("server vCPU fit %+v; want 3 points", fits[2])
	}
}

// A service graph's sidecars share one role: each step is one point, the
// busiest sidecar's, not one point per sidecar.
func TestFitProxiesSharedRoleIsOnePointPerStep(t *testing.T) {
	var steps []Step
	var judgements []Judgement
	for i := 1; i <= 3; i++ {
		s := step(100*i, 0.5, 1, 2)
		for _, share := range []float64{1, 0.5, 0.25} {
			s.Proxies = append(s.Proxies, ProxyUsage{Role: "sidecar", Kind: "sidecar", VCPU: share * 0.001 * float64(100*i), MemMB: 10})
		}
		steps = append(steps, s)
		judgements = append(judgements, Judgement{Verdict: WithinObjectives})
	}
	fits := fitProxies(steps, judgements)
	if len(fits) != 2 || fits[0].Points != 3 || math.Abs(fits[0].Slope-0.001) > 1e-12 {
		t.Fatalf("fits %+v; want a vCPU fit of 3 points along the busiest sidecar (slope 0.001)", fits)
	}
}
