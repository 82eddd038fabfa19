package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// graphPod is one pod of a hand-built graph run: its app's and (when the
// mode has sidecars) its sidecar's vCPU and RSS.
type graphPod struct {
	name                   string
	appVCPU, appMB         float64
	sidecarVCPU, sidecarMB float64
	withSidecar            bool
}

// mkGraph builds a kept run over a four-hop graph of three pods at 500
// requested qps, with the control plane and the load generator measured.
func mkGraph(mode string, p50, p90, p99, actual float64, pods []graphPod, extra ...Process) Run {
	r := Run{Scenario: "tree", RunID: "g", Mode: mode, Connections: 8, RequestedQPS: 500, ActualQPS: actual,
		Network: "netns", Label: mode, Latency: Latency{P50: p50, P90: p90, P99: p99}, ErrorPercent: 0.5,
		Graph: &GraphRun{Workload: "tree-3", Entrypoint: "a", Pods: len(pods), Hops: 4, SetupSeconds: 6,
			Services: []ServiceFigures{{Name: "a", Replicas: 1, Requests: 1000, Errors: 1, Latency: Latency{P50: p50 - 0.1, P90: p90 - 0.1, P99: p99 - 0.1}},
				{Name: "b", Replicas: 2, Requests: 2000, Latency: Latency{P50: 0.4, P90: 0.6, P99: 0.9}}}}}
	for _, p := range pods {
		r.Processes = append(r.Processes, Process{Role: RoleGraphApp, Pod: p.name, VCPU: p.appVCPU, RSSMB: p.appMB})
		if p.withSidecar {
			r.Processes = append(r.Processes, Process{Role: RoleGraphSidecar, Pod: p.name, VCPU: p.sidecarVCPU, RSSMB: p.sidecarMB})
		}
	}
	r.Processes = append(r.Processes, Process{Role: RoleControlPlane, VCPU: 0.02, RSSMB: 70},
		Process{Role: RoleLoadGenerator, VCPU: 0.5, RSSMB: 30})
	r.Processes = append(r.Processes, extra...)
	return r
}

func TestSummarizeGraphRuns(t *testing.T) {
	bare := []graphPod{{name: "a-0", appVCPU: 0.1, appMB: 20}, {name: "b-0", appVCPU: 0.1, appMB: 10}, {name: "b-1", appVCPU: 0.1, appMB: 15}}
	sidecars := []graphPod{
		{name: "a-0", appVCPU: 0.1, appMB: 20, sidecarVCPU: 0.1, sidecarMB: 30, withSidecar: true}, // pod 50 MB
		{name: "b-0", appVCPU: 0.1, appMB: 10, sidecarVCPU: 0.2, sidecarMB: 25, withSidecar: true}, // pod 35 MB
		{name: "b-1", appVCPU: 0.1, appMB: 15, sidecarVCPU: 0.3, sidecarMB: 40, withSidecar: true}, // pod 55 MB
	}
	runs := []Run{
		mkGraph("no-mesh", 2.0, 3.0, 5.0, 500, bare),
		// Added: P50 3.2-2.0 = 1.2, P90 4.6-3.0 = 1.6, P99 7.0-5.0 = 2.0;
		// per hop (4): 0.3, 0.4, 0.5. Proxies: 0.1+0.2+0.3 = 0.6 vCPU,
		// 95 MB; per 1000 rps at the entrypoint (400 actual): 0.6/0.4 =
		// 1.5. A pod's memory: median of 50, 35, 55 = 50.
		mkGraph("both-sidecars", 3.2, 4.6, 7.0, 400, sidecars),
		// Ambient: no sidecars; two node proxies and a waypoint count as
		// the mesh's proxies: 0.1+0.1+0.2 = 0.4 vCPU, 10+10+40 = 60 MB,
		// per 1000 rps 0.4/0.5 = 0.8. A pod is its app alone: median 15.
		mkGraph("ambient-waypoint", 2.4, 3.4, 5.8, 500, bare,
			Process{Role: RoleClientNodeProxy, VCPU: 0.1, RSSMB: 10}, Process{Role: RoleServerNodeProxy, VCPU: 0.1, RSSMB: 10},
			Process{Role: RoleWaypoint, VCPU: 0.2, RSSMB: 40}),
	}
	s := Summarize(runs)
	if len(s.Points) != 1 || len(s.Points[0].Modes) != 3 {
		t.Fatalf("points %+v", s.Points)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.IsNaN(got) || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	base, sc, amb := s.Points[0].Modes[0], s.Points[0].Modes[1], s.Points[0].Modes[2]
	g := sc.Graph
	if g == nil || g.Workload != "tree-3" || g.Entrypoint != "a" || g.Pods != 3 || g.Hops != 4 || g.Proxies != 3 {
		t.Fatalf("both-sidecars graph figures %+v", g)
	}
	near("+P50/hop", g.AddedPerHopP50, 0.3)
	near("+P90/hop", g.AddedPerHopP90, 0.4)
	near("+P99/hop", g.AddedPerHopP99, 0.5)
	near("mesh vCPU", g.MeshVCPU, 0.6)
	near("mesh MB", g.MeshMB, 95)
	near("mesh vCPU per 1000 entry rps", g.MeshVCPUPer1000RPS, 1.5)
	near("MB per pod", g.MBPerPod, 50)
	near("control plane vCPU", g.ControlPlaneVCPU, 0.02)
	near("apps MB", g.AppsMB, 45)
	near("setup", g.SetupSeconds, 6)
	near("errors", g.ErrorPercent, 0.5)
	// Every graph sidecar is a sidecar for the per-proxy figures too.
	near("vCPU per proxy", sc.VCPUPerProxy, 0.2)
	if len(sc.Proxies) != 1 || sc.Proxies[0].Kind != ProxySidecar || sc.Proxies[0].Count != 3 {
		t.Errorf("both-sidecars proxy costs %+v", sc.Proxies)
	}
	if len(g.Services) != 2 || g.Services[0].Name != "a" || g.Services[1].Replicas != 2 || g.Services[1].Requests != 2000 {
		t.Errorf("services %+v", g.Services)
	}

	ga := amb.Graph
	near("ambient mesh vCPU", ga.MeshVCPU, 0.4)
	near("ambient mesh MB", ga.MeshMB, 60)
	near("ambient per 1000 entry rps", ga.MeshVCPUPer1000RPS, 0.8)
	near("ambient MB per pod", ga.MBPerPod, 15)
	near("ambient +P50/hop", ga.AddedPerHopP50, 0.1)

	gb := base.Graph
	if gb.Proxies != 0 || !math.IsNaN(gb.MeshVCPU) || !math.IsNaN(gb.MeshVCPUPer1000RPS) || !math.IsNaN(gb.AddedPerHopP50) {
		t.Errorf("no-mesh has a mesh cost or added latency: %+v", gb)
	}

	var b bytes.Buffer
	if err := WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	wantText(t, "graph summary", b.String(),
		"service graph tree-3, load at a:",
		"divided by the 4 hops of the longest path",
		"per 1000 rps at the entrypoint",
		"+0.300", "+0.400", "+0.500", // per hop, both-sidecars
		"0.600", "1.500", "95.0", "50.0") // proxies' vCPU, per 1000 entry rps, MB, MB per pod
}

// A two-pod run's summary says nothing of graphs.
func TestSummaryTwoPodHasNoGraph(t *testing.T) {
	s := Summarize([]Run{mk("no-mesh", 4, 1000, 0.2, 0.3, 0.5, 1000, nil, nil),
		mk("both-sidecars", 4, 1000, 0.4, 0.5, 0.7, 1000, []float64{0.1, 0.3}, []float64{10, 20})})
	if s.Graph() != nil {
		t.Fatalf("two-pod summary has graph figures %+v", s.Graph())
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "service graph") || strings.Contains(b.String(), "whole mesh") {
		t.Errorf("two-pod summary speaks of a graph:\n%s", b.String())
	}
}

// A graph's memory is summed from each process's PSS where it was read:
// a hundred apps of one binary share its pages, which their RSS would
// count a hundred times.
func TestGraphMemoryIsProportional(t *testing.T) {
	r := mkGraph("both-sidecars", 10, 12, 14, 100, []graphPod{{name: "a-0", appMB: 50, sidecarMB: 14, withSidecar: true}, {name: "b-0", appMB: 50, sidecarMB: 14, withSidecar: true}})
	for i := range r.Processes {
		switch r.Processes[i].Role {
		case RoleGraphApp:
			r.Processes[i].PSSMB = 8
		case RoleGraphSidecar:
			r.Processes[i].PSSMB = 4
		}
	}
	g := graphFigures([]Run{r})
	if g.MBPerPod != 12 || g.MeshMB != 8 || g.AppsMB != 16 {
		t.Errorf("MB per pod %v, mesh MB %v, apps MB %v: want 12, 8 and 16 from PSS", g.MBPerPod, g.MeshMB, g.AppsMB)
	}
	r.Processes[0].PSSMB = math.NaN() // unread: its RSS stands in
	if g := graphFigures([]Run{r}); g.AppsMB != 58 {
		t.Errorf("apps MB %v with one PSS unread, want 50+8", g.AppsMB)
	}
}
