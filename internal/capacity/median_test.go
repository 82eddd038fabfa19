package capacity

import (
	"math"
	"testing"
)

func TestMedianStep(t *testing.T) {
	a, b, c := step(1000, 1, 2, 3), step(1000, 1.2, 2.4, 30), step(1000, 0.9, 1.8, 2.7)
	a.ActualRPS, b.ActualRPS, c.ActualRPS = 1000, 940, 990
	a.Generator.SendDelayP99MS, b.Generator.SendDelayP99MS, c.Generator.SendDelayP99MS = 0.1, 5, math.NaN()
	for i, s := range []*Step{&a, &b, &c} {
		// A graph's two sidecars share a role: matched by their order.
		s.Proxies = []ProxyUsage{
			{Role: "sidecar", Kind: "sidecar", VCPU: 0.1 * float64(i+1), MemMB: 10},
			{Role: "sidecar", Kind: "sidecar", VCPU: 0.01 * float64(i+1), MemMB: math.NaN()},
		}
	}
	m := MedianStep([]Step{a, b, c})
	if p99, _ := m.At(99); p99 != 3 || m.ActualRPS != 990 || m.Repetitions != 3 {
		t.Errorf("median p99 %v, rate %v, repetitions %d; want 3 ms (not the one slow run's 30), 990 rps, 3", p99, m.ActualRPS, m.Repetitions)
	}
	if m.Generator.SendDelayP99MS != (0.1+5)/2 || m.Generator.Cores != 2 {
		t.Errorf("generator %+v; want the median of the two known send delays, 2.55 ms, and its cores", m.Generator)
	}
	if len(m.Proxies) != 2 || m.Proxies[0].VCPU != 0.2 || m.Proxies[1].VCPU != 0.02 || m.Proxies[0].MemMB != 10 || !math.IsNaN(m.Proxies[1].MemMB) {
		t.Errorf("proxies %+v; want each sidecar's own median (0.2, 0.02 vCPU), unknown memory NaN", m.Proxies)
	}

	// A failed repetition measured nothing: the median is of the others.
	b.Failed = true
	if m := MedianStep([]Step{a, b, c}); m.Failed || m.ActualRPS != 995 || m.Repetitions != 3 {
		t.Errorf("with one failed: %+v; want the median of the two that ran", m)
	}
	// All failed: the step failed.
	a.Failed, c.Failed = true, true
	if m := MedianStep([]Step{a, b, c}); !m.Failed {
		t.Errorf("all failed: %+v; want a failed step", m)
	}
	if m := MedianStep(nil); m.Repetitions != 0 || m.Failed {
		t.Errorf("no repetitions: %+v; want the zero step", m)
	}
}
