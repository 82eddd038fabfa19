package dashboard

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/results"
)

// runJSON is results.Run as the API writes it: snake_case keys, units in
// the names, unknown figures (NaN) as null. results.Run has no JSON form
// of its own; this is it for readers of the store.
type runJSON struct {
	RunID           string             `json:"run_id"`
	Label           string             `json:"label"` // Istio's, <runid>_qps_<q>_c_<c>_<size>_<mode>
	Scenario        string             `json:"scenario"`
	Mode            string             `json:"mode"`
	Protocol        string             `json:"protocol"`
	Repetition      int                `json:"repetition"`
	Connections     int                `json:"connections"`
	RequestedQPS    int                `json:"requested_qps"` // 0: as fast as possible
	ActualQPS       compare.Number     `json:"actual_qps"`
	DurationSeconds float64            `json:"duration_seconds"`
	PayloadBytes    int                `json:"payload_bytes"`
	ResponseBytes   compare.Number     `json:"response_bytes"`
	MTLS            bool               `json:"mtls"`
	StartTime       time.Time          `json:"start_time"`
	Network         string             `json:"network"`
	LatencyMs       latencyJSON        `json:"latency_ms"`
	Spectrum        []percentileJSON   `json:"spectrum"`
	Corrected       bool               `json:"corrected"` // for coordinated omission
	Calls           int64              `json:"calls"`
	Errors          int64              `json:"errors"`
	ErrorPercent    compare.Number     `json:"error_percent"`
	Codes           map[string]int64   `json:"codes,omitempty"`
	SendDelayP99Ms  compare.Number     `json:"send_delay_p99_ms"` // the load generator's own lateness in sending; null when unknown
	Processes       []processJSON      `json:"processes"`
	Prometheus      []promJSON         `json:"prometheus,omitempty"` // lab run -prometheus: each proxy's figures from Prometheus
	Graph           *graphJSON         `json:"graph,omitempty"`      // a run over a service graph: results.GraphRun
	Failed          bool               `json:"failed"`
	FailureReason   string             `json:"failure_reason,omitempty"`
	FortioJSON      string             `json:"fortio_json"` // the result file's path where the run was made
	Provenance      results.Provenance `json:"provenance"`
}

type latencyJSON struct {
	Min   compare.Number `json:"min"`
	Max   compare.Number `json:"max"`
	Avg   compare.Number `json:"avg"`
	P50   compare.Number `json:"p50"`
	P75   compare.Number `json:"p75"`
	P90   compare.Number `json:"p90"`
	P99   compare.Number `json:"p99"`
	P999  compare.Number `json:"p999"`
	P9999 compare.Number `json:"p9999"`
}

type percentileJSON struct {
	Percentile float64        `json:"percentile"` // 0-100
	Ms         compare.Number `json:"ms"`
}

// processJSON is results.Process with NaN as null (its own JSON tags would
// fail on an unknown PSS).
type processJSON struct {
	Role     string         `json:"role"`
	Pod      string         `json:"pod,omitempty"` // in a run over a service graph
	PID      int            `json:"pid"`
	VCPU     compare.Number `json:"vcpu"`
	RSSMB    compare.Number `json:"rss_mb"`
	PSSMB    compare.Number `json:"pss_mb"`
	MaxRSSMB compare.Number `json:"max_rss_mb"`
	// Counters are results.ProcessCounters with NaN as null; absent when
	// the run did not measure them.
	Counters *countersJSON `json:"counters,omitempty"`
}

// countersJSON is results.ProcessCounters with NaN as null.
type countersJSON struct {
	UserVCPU                      compare.Number `json:"user_vcpu"`
	SystemVCPU                    compare.Number `json:"system_vcpu"`
	SyscallsPerRequest            compare.Number `json:"syscalls_per_request"`
	VoluntarySwitchesPerRequest   compare.Number `json:"voluntary_switches_per_request"`
	InvoluntarySwitchesPerRequest compare.Number `json:"involuntary_switches_per_request"`
	AllocationsPerRequest         compare.Number `json:"allocations_per_request"`
}

// promJSON is results.PromFigures with NaN as null.
type promJSON struct {
	Role     string         `json:"role"`
	VCPU     compare.Number `json:"vcpu"`
	RSSMB    compare.Number `json:"rss_mb"`
	MaxRSSMB compare.Number `json:"max_rss_mb"`
	RPS      compare.Number `json:"rps"`
	P50      compare.Number `json:"p50_ms"`
	P90      compare.Number `json:"p90_ms"`
	P99      compare.Number `json:"p99_ms"`
}

// graphJSON is results.GraphRun with NaN as null.
type graphJSON struct {
	Workload     string            `json:"workload"`
	Entrypoint   string            `json:"entrypoint"`
	Pods         int               `json:"pods"`
	Hops         int               `json:"hops"`
	SetupSeconds compare.Number    `json:"setup_seconds"`
	Services     []serviceJSON     `json:"services"`
	Transactions []transactionJSON `json:"transactions,omitempty"` // Acmeair's driver only
}

type serviceJSON struct {
	Name      string      `json:"name"`
	Replicas  int         `json:"replicas"`
	Requests  int64       `json:"requests"`
	Errors    int64       `json:"errors"`
	LatencyMs latencyJSON `json:"latency_ms"`
}

type transactionJSON struct {
	Name      string         `json:"name"`
	Count     int64          `json:"count"`
	Errors    int64          `json:"errors"`
	RPS       compare.Number `json:"rps"`
	LatencyMs latencyJSON    `json:"latency_ms"`
}

func latencyJSONOf(l results.Latency) latencyJSON {
	n := func(v float64) compare.Number { return compare.Number(v) }
	return latencyJSON{Min: n(l.Min), Max: n(l.Max), Avg: n(l.Avg), P50: n(l.P50), P75: n(l.P75),
		P90: n(l.P90), P99: n(l.P99), P999: n(l.P999), P9999: n(l.P9999)}
}

func graphJSONOf(g *results.GraphRun) *graphJSON {
	if g == nil {
		return nil
	}
	j := &graphJSON{Workload: g.Workload, Entrypoint: g.Entrypoint, Pods: g.Pods, Hops: g.Hops,
		SetupSeconds: compare.Number(g.SetupSeconds), Services: []serviceJSON{}}
	for _, s := range g.Services {
		j.Services = append(j.Services, serviceJSON{Name: s.Name, Replicas: s.Replicas, Requests: s.Requests,
			Errors: s.Errors, LatencyMs: latencyJSONOf(s.Latency)})
	}
	for _, t := range g.Transactions {
		j.Transactions = append(j.Transactions, transactionJSON{Name: t.Name, Count: t.Count, Errors: t.Errors,
			RPS: compare.Number(t.RPS), LatencyMs: latencyJSONOf(t.Latency)})
	}
	return j
}

func runJSONOf(r results.Run) runJSON {
	n := func(v float64) compare.Number { return compare.Number(v) }
	j := runJSON{
		RunID: r.RunID, Label: r.Label, Scenario: r.Scenario, Mode: r.Mode, Protocol: r.Protocol,
		Repetition: r.Repetition, Connections: r.Connections, RequestedQPS: r.RequestedQPS, ActualQPS: n(r.ActualQPS),
		DurationSeconds: r.Duration.Seconds(), PayloadBytes: r.PayloadSize, ResponseBytes: n(r.ResponseSize),
		MTLS: r.MTLS, StartTime: r.StartTime.UTC(), Network: r.Network,
		LatencyMs: latencyJSONOf(r.Latency),
		Spectrum:  []percentileJSON{}, Corrected: r.Corrected, Calls: r.Calls, Errors: r.Errors,
		ErrorPercent: n(r.ErrorPercent), Codes: r.Codes, SendDelayP99Ms: n(r.SendDelayP99), Processes: []processJSON{}, Failed: r.Failed,
		FailureReason: r.FailureReason, FortioJSON: r.FortioJSON, Provenance: r.Provenance, Graph: graphJSONOf(r.Graph),
	}
	for _, pv := range r.Spectrum {
		j.Spectrum = append(j.Spectrum, percentileJSON{Percentile: pv.Percentile, Ms: n(pv.Ms)})
	}
	for _, p := range r.Processes {
		pj := processJSON{Role: p.Role, Pod: p.Pod, PID: p.PID, VCPU: n(p.VCPU), RSSMB: n(p.RSSMB),
			PSSMB: n(p.PSSMB), MaxRSSMB: n(p.MaxRSSMB)}
		if c := p.Counters; c != nil {
			pj.Counters = &countersJSON{n(c.UserVCPU), n(c.SystemVCPU), n(c.SyscallsPerRequest),
				n(c.VoluntarySwitchesPerRequest), n(c.InvoluntarySwitchesPerRequest), n(c.AllocationsPerRequest)}
		}
		j.Processes = append(j.Processes, pj)
	}
	for _, f := range r.Prometheus {
		j.Prometheus = append(j.Prometheus, promJSON{Role: f.Role, VCPU: n(f.VCPU), RSSMB: n(f.RSSMB),
			MaxRSSMB: n(f.MaxRSSMB), RPS: n(f.RPS), P50: n(f.P50), P90: n(f.P90), P99: n(f.P99)})
	}
	return j
}

// controlPlaneRunJSON is a stored control-plane load test: every column
// of cp_runs, and the whole report cpload wrote.
type controlPlaneRunJSON struct {
	Label            string             `json:"label"`
	Shape            string             `json:"shape"`
	Start            time.Time          `json:"start"`
	Target           string             `json:"target"`
	External         bool               `json:"external"`
	Delta            bool               `json:"delta"`
	Proxies          int                `json:"proxies"`
	Services         int                `json:"services"`
	Sidecar          string             `json:"sidecar"`
	Churn            string             `json:"churn"`
	Changes          int                `json:"changes"`
	Missed           int                `json:"missed"`
	Pushes           *float64           `json:"pushes"`
	ConvergenceP50Ms *float64           `json:"convergence_p50_ms"`
	ConvergenceP90Ms *float64           `json:"convergence_p90_ms"`
	ConvergenceP99Ms *float64           `json:"convergence_p99_ms"`
	E2EP50Ms         *float64           `json:"e2e_p50_ms"`
	E2EP90Ms         *float64           `json:"e2e_p90_ms"`
	E2EP99Ms         *float64           `json:"e2e_p99_ms"`
	E2EMaxMs         *float64           `json:"e2e_max_ms"`
	AllSyncedMs      *float64           `json:"all_synced_ms"`
	ConfigBytesMean  *float64           `json:"config_bytes_mean"`
	CPUSeconds       *float64           `json:"cpu_seconds"`
	RSSMaxMB         *float64           `json:"rss_max_mb"`
	Provenance       results.Provenance `json:"provenance"`
	// Report is cpload's --json report as stored; null if it is not JSON.
	Report json.RawMessage `json:"report"`
}

func controlPlaneRunJSONOf(r results.ControlPlaneRun) controlPlaneRunJSON {
	j := controlPlaneRunJSON{Label: r.Label, Shape: r.Shape, Start: r.Start, Target: r.Target, External: r.External, Delta: r.Delta,
		Proxies: r.Proxies, Services: r.Services, Sidecar: r.Sidecar, Churn: r.Churn, Changes: r.Changes, Missed: r.Missed,
		Pushes: r.Pushes, ConvergenceP50Ms: r.ConvergenceP50, ConvergenceP90Ms: r.ConvergenceP90, ConvergenceP99Ms: r.ConvergenceP99,
		E2EP50Ms: r.E2EP50, E2EP90Ms: r.E2EP90, E2EP99Ms: r.E2EP99, E2EMaxMs: r.E2EMax, AllSyncedMs: r.AllSyncedMs,
		ConfigBytesMean: r.ConfigBytesMean, CPUSeconds: r.CPUSeconds, RSSMaxMB: r.RSSMaxMB, Provenance: r.Provenance}
	if json.Valid([]byte(r.ReportJSON)) {
		j.Report = json.RawMessage(r.ReportJSON)
	}
	return j
}

func (s *server) controlPlaneRuns(*http.Request) (response, error) {
	runs, err := s.store.ControlPlaneRuns()
	if err != nil {
		return response{}, err
	}
	out := make([]controlPlaneRunJSON, 0, len(runs))
	for _, r := range runs {
		out = append(out, controlPlaneRunJSONOf(r))
	}
	return response{value: out}, nil
}
