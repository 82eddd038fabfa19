// Package comparetest makes lab runs with realistic figures for the tests
// of compare and of `meshperf compare`: each run's calls drawn from a
// latency distribution, summarized as the lab stores them (percentiles,
// spectrum, proxies' CPU and memory) and, when asked, written as the load
// generator's JSON result with its histogram.
package comparetest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// Invocation is one lab invocation to make: every mode at every point,
// Repetitions times.
type Invocation struct {
	RunID       string
	Scenario    string
	Repetitions int
	Start       time.Time
	// SlowdownMs is added to every call of the mesh modes: a build with
	// an injected delay per request in the proxy.
	SlowdownMs float64
	Seed       uint64
	// Provenance is every run's; the no-mesh runs' without a data plane.
	Provenance results.Provenance
	// Dir, when set, receives each run's load result JSON, which the run's
	// FortioJSON then names.
	Dir string
}

// Modes are the modes each invocation runs, and what their proxies cost.
var Modes = []struct {
	Name    string
	AddedMs float64 // over no-mesh at the median
	Proxies []string
	VCPU    float64 // per proxy at 1000 rps
	MB      float64
}{
	{results.ModeNoMesh, 0, nil, 0, 0},
	{"both-sidecars", 0.32, []string{results.RoleClientSidecar, results.RoleServerSidecar}, 0.21, 38},
	{"ambient", 0.12, []string{results.RoleClientNodeProxy, results.RoleServerNodeProxy}, 0.09, 22},
}

// Connections and QPS are the points of the matrix.
var (
	Connections = []int{2, 16}
	QPS         = 1000
)

// callsPerRun is a 20 s run at 1000 qps.
const callsPerRun = 20000

// bucketMs is the histogram's bucket width.
const bucketMs = 0.05

// Runs makes the invocation's runs.
func Runs(inv Invocation) ([]results.Run, error) {
	rng := rand.New(rand.NewPCG(inv.Seed, 0x6d657368))
	var runs []results.Run
	at := inv.Start
	for rep := 1; rep <= inv.Repetitions; rep++ {
		for _, c := range Connections {
			for _, m := range Modes {
				// Each repetition runs a little faster or slower as a
				// whole (what else the machine is doing): about 2%.
				drift := 1 + 0.02*rng.NormFloat64()
				base := 0.16 + 0.01*float64(c)
				slow := 0.0
				if m.Name != results.ModeNoMesh {
					slow = inv.SlowdownMs
				}
				calls := make([]float64, callsPerRun)
				for i := range calls {
					// A floor and a log-normal body with a tail.
					calls[i] = (base+m.AddedMs)*drift*0.7 + (base+m.AddedMs)*drift*0.3*math.Exp(0.6*rng.NormFloat64()) + slow
				}
				slices.Sort(calls)
				r := results.Run{RunID: inv.RunID, Scenario: inv.Scenario, Mode: m.Name, Protocol: "http", Repetition: rep,
					Connections: c, RequestedQPS: QPS, ActualQPS: float64(QPS) * (1 - 0.001*rng.Float64()), Duration: 20 * time.Second,
					PayloadSize: 1024, ResponseSize: 1170, MTLS: m.Name != results.ModeNoMesh, StartTime: at, Network: "netns",
					Corrected: true, Calls: callsPerRun, SendDelayP99: math.NaN()}
				r.Provenance = inv.Provenance
				if m.Name == results.ModeNoMesh {
					r.Provenance.DataPlane = results.Component{}
				}
				r.Label = fmt.Sprintf("%s_qps_%d_c_%d_1024_%s", inv.RunID, QPS, c, m.Name)
				r.Latency = latencyOf(calls)
				for _, p := range results.SpectrumPercentiles {
					r.Spectrum = append(r.Spectrum, results.PercentileValue{Percentile: p, Ms: quantile(calls, p)})
				}
				for i, role := range m.Proxies {
					r.Processes = append(r.Processes, results.Process{Role: role, PID: 1000 + i,
						VCPU: m.VCPU * (1 + 0.04*rng.NormFloat64()), RSSMB: m.MB * (1 + 0.01*rng.NormFloat64()), PSSMB: math.NaN(), MaxRSSMB: m.MB * 1.05})
				}
				r.Processes = append(r.Processes, results.Process{Role: results.RoleClientApp, PID: 900, VCPU: 0.4, RSSMB: 30, PSSMB: math.NaN(), MaxRSSMB: 31})
				if inv.Dir != "" {
					path := filepath.Join(inv.Dir, r.Label+fmt.Sprintf("_%d.json", rep))
					if err := writeResult(path, r, calls); err != nil {
						return nil, err
					}
					r.FortioJSON = path
				}
				runs = append(runs, r)
				at = at.Add(25 * time.Second)
			}
		}
	}
	return runs, nil
}

// quantile of sorted calls at pct (0-100), by the nearest rank.
func quantile(sorted []float64, pct float64) float64 {
	i := int(math.Ceil(pct/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func latencyOf(sorted []float64) results.Latency {
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	return results.Latency{Min: sorted[0], Max: sorted[len(sorted)-1], Avg: sum / float64(len(sorted)),
		P50: quantile(sorted, 50), P75: quantile(sorted, 75), P90: quantile(sorted, 90), P99: quantile(sorted, 99),
		P999: quantile(sorted, 99.9), P9999: quantile(sorted, 99.99)}
}

// writeResult writes the run as the load generator's JSON, seconds as
// Fortio writes them, with the calls bucketed.
func writeResult(path string, r results.Run, sorted []float64) error {
	type bucket struct {
		Start, End, Percent float64
		Count               int64
	}
	type pct struct{ Percentile, Value float64 }
	// Buckets of bucketMs, the first starting at the fastest call and the
	// last ending at the slowest, as Fortio's do.
	var data []bucket
	lo, hi := sorted[0], sorted[len(sorted)-1]
	last := -1.0
	for i, v := range sorted {
		edge := math.Floor(v / bucketMs)
		if edge != last {
			last = edge
			data = append(data, bucket{Start: math.Max(lo, edge*bucketMs) / 1e3, End: math.Min(hi, (edge+1)*bucketMs) / 1e3})
		}
		d := &data[len(data)-1]
		d.Count++
		d.Percent = 100 * float64(i+1) / float64(len(sorted))
	}
	var pcts []pct
	for _, pv := range r.Spectrum {
		pcts = append(pcts, pct{pv.Percentile, pv.Ms / 1e3})
	}
	doc := map[string]any{
		"RunType": "HTTP", "Labels": r.Label, "StartTime": r.StartTime, "RequestedQPS": fmt.Sprint(r.RequestedQPS),
		"ActualQPS": r.ActualQPS, "ActualDuration": int64(r.Duration), "NumThreads": r.Connections,
		"CoordinatedOmissionCorrected": r.Corrected,
		"DurationHistogram": map[string]any{"Count": len(sorted), "Min": r.Latency.Min / 1e3, "Max": r.Latency.Max / 1e3,
			"Avg": r.Latency.Avg / 1e3, "Data": data, "Percentiles": pcts},
		"ErrorsDurationHistogram": map[string]any{"Count": 0},
		"RetCodes":                map[string]int64{"200": int64(len(sorted))},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
