package driver_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
)

func TestGrowthExponent(t *testing.T) {
	x := []float64{500, 1000, 2000, 5000}
	for _, c := range []struct {
		name string
		y    func(x float64) float64
		want float64
	}{
		{"linear", func(x float64) float64 { return 0.002 * x }, 1},
		{"quadratic", func(x float64) float64 { return 3e-6 * x * x }, 2},
		{"flat", func(float64) float64 { return 7 }, 0},
	} {
		var y []float64
		for _, v := range x {
			y = append(y, c.y(v))
		}
		if got := driver.GrowthExponent(x, y); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: exponent %v, want %v", c.name, got, c.want)
		}
	}
	if got := driver.GrowthExponent([]float64{100}, []float64{1}); !math.IsNaN(got) {
		t.Errorf("one point: %v, want NaN", got)
	}
	if got := driver.GrowthExponent([]float64{100, 100}, []float64{1, 2}); !math.IsNaN(got) {
		t.Errorf("equal sizes: %v, want NaN", got)
	}
}

// Two sizes against meshperf pilot: every step's proxies synced, the
// connect CPU per proxy and the growth computed from real figures, and
// the cost check holding the ratio it computed.
func TestRunScale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	multiples := []int{1, 2}
	var configs []driver.Config
	for _, m := range multiples {
		mesh, err := shape.Uniform(shape.UniformOptions{Namespaces: 2 * m, ServicesPerNamespace: 5, Replicas: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, driver.Config{Shape: "uniform", Mesh: mesh, Scoping: driver.ScopeNamespace, Churn: driver.ChurnNone,
			ConnectRate: -1, PilotCommand: pilotCommand(t), Timeout: 30 * time.Second})
	}
	sr, err := driver.RunScale(ctx, configs, multiples)
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Steps) != 2 {
		t.Fatalf("%d steps, want 2", len(sr.Steps))
	}
	for i, s := range sr.Steps {
		if s.Proxies != 20*multiples[i] || s.Services != 10*multiples[i] || s.Report.Connect.AllSynced <= 0 {
			t.Errorf("step %dx: %d proxies, %d services, synced %v ms", s.Multiple, s.Proxies, s.Services, s.Report.Connect.AllSynced)
		}
		if s.ConnectCPUSeconds <= 0 || s.ConnectCPUPerProxyMs <= 0 || s.PeakRSSMB <= 0 || s.RSSPerServiceKB <= 0 {
			t.Errorf("step %dx: connect CPU %v s (%v ms/proxy), peak %v MB, %v KB/service", s.Multiple,
				s.ConnectCPUSeconds, s.ConnectCPUPerProxyMs, s.PeakRSSMB, s.RSSPerServiceKB)
		}
	}
	want := sr.Steps[1].ConnectCPUPerProxyMs / sr.Steps[0].ConnectCPUPerProxyMs
	if math.Abs(sr.CostRatio-want) > 1e-9 || math.IsNaN(sr.Growth.ConnectCPU) {
		t.Errorf("cost ratio %v (want %v), connect CPU growth %v", sr.CostRatio, want, sr.Growth.ConnectCPU)
	}
	if err := sr.CheckCost(sr.CostRatio * 1.01); err != nil {
		t.Errorf("within the bound: %v", err)
	}
	if err := sr.CheckCost(sr.CostRatio * 0.99); err == nil || !strings.Contains(err.Error(), "connect CPU per proxy grew") {
		t.Errorf("over the bound: %v", err)
	}
	var out strings.Builder
	sr.Print(&out)
	if !strings.Contains(out.String(), "growth with proxies (1 is linear)") || strings.Count(out.String(), "\n") != 5 {
		t.Errorf("printed:\n%s", out.String())
	}
}

// A cost check that could not measure the cost fails rather than passes.
func TestCheckCostNeedsAMeasurement(t *testing.T) {
	sr := &driver.ScaleReport{Steps: []driver.ScaleStep{{Proxies: 500}, {Proxies: 5000, ConnectCPUPerProxyMs: 1}}}
	if err := sr.CheckCost(2); err == nil || !strings.Contains(err.Error(), "could not be measured") {
		t.Errorf("CheckCost without the first size's cost: %v", err)
	}
	if err := sr.CheckCost(0); err != nil {
		t.Errorf("no check asked: %v", err)
	}
}
