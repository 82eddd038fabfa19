package results

import (
	"math"
	"testing"

	"github.com/meshperf/meshperf/internal/capacity"
)

func TestStepOfTwoPodRun(t *testing.T) {
	nan := math.NaN()
	r := Run{Label: "s_qps_2000_c_4_1024_both", RequestedQPS: 2000, ActualQPS: 1990, ErrorPercent: 0.05,
		SendDelayP99: 0.3, Connections: 4,
		// P95 and P99 from the spectrum; P75 and P99.99 only in Latency.
		Latency:  Latency{Avg: 0.55, P50: 0.5, P75: 0.6, P90: 0.7, P99: 9, P999: 1.5, P9999: 2},
		Spectrum: []PercentileValue{{50, 0.51}, {90, 0.71}, {95, 0.8}, {99, 1.1}, {99.9, 1.6}},
		Processes: []Process{
			{Role: RoleClientApp, VCPU: 1.8, RSSMB: 40, PSSMB: nan},
			{Role: RoleServerApp, VCPU: 0.9, RSSMB: 20, PSSMB: 18},
			{Role: RoleClientSidecar, VCPU: 0.3, RSSMB: 14, PSSMB: 11},
			{Role: RoleServerSidecar, VCPU: nan, RSSMB: 15, PSSMB: nan},
		}}
	s := StepOf(r, 2)
	if s.Label != r.Label || s.RequestedRPS != 2000 || s.ActualRPS != 1990 || s.ErrorPercent != 0.05 || s.Failed ||
		s.Connections != 4 || s.MeanMS != 0.55 {
		t.Errorf("step = %+v", s)
	}
	want := map[float64]float64{50: 0.51, 75: 0.6, 90: 0.71, 95: 0.8, 99: 1.1, 99.9: 1.6, 99.99: 2}
	if len(s.Latency) != len(capacity.Percentiles) {
		t.Fatalf("latency at %v, want each of %v", s.Latency, capacity.Percentiles)
	}
	for _, pm := range s.Latency {
		if pm.MS != want[pm.Percentile] {
			t.Errorf("P%v = %v ms, want %v", pm.Percentile, pm.MS, want[pm.Percentile])
		}
	}
	if g := s.Generator; g.VCPU != 1.8 || g.Cores != 2 || g.SendDelayP99MS != 0.3 {
		t.Errorf("generator %+v, want 1.8 vCPU of 2 cores, 0.3 ms send delay", g)
	}
	if sv := s.Server; sv.VCPU != 0.9 || sv.Cores != 2 || !math.IsNaN(sv.SendDelayP99MS) {
		t.Errorf("server %+v, want 0.9 vCPU of 2 cores, no send delay", sv)
	}
	if len(s.Proxies) != 2 {
		t.Fatalf("proxies %+v, want the two sidecars", s.Proxies)
	}
	c, sv := s.Proxies[0], s.Proxies[1]
	if c.Role != RoleClientSidecar || c.Kind != ProxySidecar || c.VCPU != 0.3 || c.MemMB != 11 {
		t.Errorf("client sidecar %+v, want its PSS as memory", c)
	}
	if sv.Role != RoleServerSidecar || !math.IsNaN(sv.VCPU) || sv.MemMB != 15 {
		t.Errorf("server sidecar %+v, want unknown vCPU and its RSS where PSS is unknown", sv)
	}
}

func TestStepOfFailedAndGraphRuns(t *testing.T) {
	nan := math.NaN()
	failed := Run{Label: "f", RequestedQPS: 500, Failed: true, FailureReason: "server-sidecar exited", SendDelayP99: nan,
		Latency: Latency{Min: nan, Max: nan, Avg: nan, P50: nan, P75: nan, P90: nan, P99: nan, P999: nan, P9999: nan}}
	s := StepOf(failed, 4)
	if !s.Failed || s.FailureReason != "server-sidecar exited" || !math.IsNaN(s.Generator.VCPU) || !math.IsNaN(s.Server.VCPU) ||
		s.Generator.Cores != 4 || !math.IsNaN(s.Generator.SendDelayP99MS) || s.Proxies != nil {
		t.Errorf("failed run's step = %+v", s)
	}
	for _, pm := range s.Latency {
		if !math.IsNaN(pm.MS) {
			t.Errorf("failed run's P%v = %v, want NaN", pm.Percentile, pm.MS)
		}
	}
	// A graph: the generator is the load generator, the server the busiest
	// app, every sidecar and the waypoint a proxy, the control plane none.
	graph := Run{Graph: &GraphRun{Workload: "tree-3"}, SendDelayP99: 0.1, Processes: []Process{
		{Role: RoleLoadGenerator, VCPU: 0.7},
		{Role: RoleGraphApp, Pod: "leaf-1", VCPU: 0.2},
		{Role: RoleGraphApp, Pod: "entry", VCPU: 0.6, PSSMB: nan},
		{Role: RoleGraphApp, Pod: "leaf-2", VCPU: nan},
		{Role: RoleGraphSidecar, Pod: "entry", VCPU: 0.25, RSSMB: 9, PSSMB: 7},
		{Role: RoleWaypoint, VCPU: 0.15, RSSMB: 8, PSSMB: nan},
		{Role: RoleControlPlane, VCPU: 0.05},
	}}
	s = StepOf(graph, 2)
	if s.Generator.VCPU != 0.7 || s.Generator.SendDelayP99MS != 0.1 || s.Server.VCPU != 0.6 || s.Server.Cores != 2 {
		t.Errorf("graph step generator %+v server %+v; want 0.7 vCPU and the entry app's 0.6", s.Generator, s.Server)
	}
	if len(s.Proxies) != 2 || s.Proxies[0].Kind != ProxySidecar || s.Proxies[0].MemMB != 7 ||
		s.Proxies[1].Kind != ProxyWaypoint || s.Proxies[1].MemMB != 8 {
		t.Errorf("graph step proxies %+v, want the sidecar and the waypoint", s.Proxies)
	}
}
