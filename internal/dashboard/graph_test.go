package dashboard_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// A run over a service graph: the API gives its graph figures and each
// process's pod, and the run page has the report's graph part.
func TestGraphRunInAPIAndPage(t *testing.T) {
	s := newSeededStore(t, invocationSpec{"1.0.0", 2})
	nan := math.NaN()
	for i, mode := range []string{results.ModeNoMesh, "both-sidecars"} {
		r := labRun("graph01", mode, 1, day1.Add(time.Duration(i)*time.Minute), invocationSpec{"1.0.0", 2})
		r.Scenario = "tree"
		r.Processes = []results.Process{
			{Role: results.RoleGraphApp, Pod: "a-0", PID: 10, VCPU: 0.1, RSSMB: 20, PSSMB: nan, MaxRSSMB: 21},
			{Role: results.RoleControlPlane, PID: 11, VCPU: 0.01, RSSMB: 60, PSSMB: nan, MaxRSSMB: 61},
		}
		if mode != results.ModeNoMesh {
			r.Processes = append(r.Processes, results.Process{Role: results.RoleGraphSidecar, Pod: "a-0", PID: 12, VCPU: 0.2, RSSMB: 30, PSSMB: nan, MaxRSSMB: 31})
		}
		r.Graph = &results.GraphRun{Workload: "tree-3", Entrypoint: "a", Pods: 1, Hops: 2, SetupSeconds: 3.5,
			Services: []results.ServiceFigures{{Name: "a", Replicas: 1, Requests: 100, Errors: 1,
				Latency: results.Latency{Min: nan, Max: nan, Avg: nan, P50: 0.5, P75: nan, P90: 0.9, P99: 2, P999: nan, P9999: nan}}},
			Transactions: []results.TransactionFigures{{Name: "Login", Count: 40, RPS: 4, Latency: results.Latency{P50: 1, P99: 3}}}}
		if err := s.st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, s)

	var d struct {
		Runs []struct {
			Mode      string
			Processes []struct{ Role, Pod string }
			Graph     *struct {
				Workload, Entrypoint string
				Pods, Hops           int
				SetupSeconds         float64 `json:"setup_seconds"`
				Services             []struct {
					Name      string
					Requests  int64
					LatencyMs struct {
						P50 float64
						P75 *float64
					} `json:"latency_ms"`
				}
				Transactions []struct {
					Name string
					RPS  float64
				}
			}
		}
	}
	getJSON(t, srv, "/api/runs/graph01", &d)
	if len(d.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(d.Runs))
	}
	r := d.Runs[1]
	g := r.Graph
	if g == nil || g.Workload != "tree-3" || g.Entrypoint != "a" || g.Hops != 2 || g.SetupSeconds != 3.5 ||
		len(g.Services) != 1 || g.Services[0].Requests != 100 || g.Services[0].LatencyMs.P50 != 0.5 || g.Services[0].LatencyMs.P75 != nil ||
		len(g.Transactions) != 1 || g.Transactions[0].RPS != 4 {
		t.Errorf("graph in the API: %+v", g)
	}
	if len(r.Processes) != 3 || r.Processes[0].Pod != "a-0" || r.Processes[1].Pod != "" || r.Processes[2].Role != results.RoleGraphSidecar {
		t.Errorf("processes in the API: %+v", r.Processes)
	}
	// A two-pod run has no graph key at all.
	if status, _, raw := get(t, srv, "/api/runs/run01"); status != 200 || !bytes.Contains(raw, []byte(`"processes"`)) {
		t.Errorf("GET /api/runs/run01 = %d %s", status, raw)
	} else if bytes.Contains(raw, []byte(`"graph"`)) || bytes.Contains(raw, []byte(`"pod"`)) {
		t.Errorf("a two-pod run's JSON has a graph or a pod")
	}

	wantPage(t, srv, "/runs/graph01", 200, "Service graph: tree-3", `class="graph-modes"`, `class="graph-cost"`,
		`class="graph-services"`, `class="graph-transactions"`, `data-kind="graph-latency"`, `data-kind="graph-service-p50"`)
}
