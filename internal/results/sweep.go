package results

import (
	"math"

	"github.com/meshperf/meshperf/internal/capacity"
)

// Sweep is what a capacity sweep (meshperf lab sweep) stores beside its
// invocation's runs: each step is an ordinary Run (so compare, history and
// the dashboard see it as any other), and the analysis of all of them —
// knees, capacities, fits, the capacity lost to each mode and the sizing
// advice — is kept whole, as it was printed, under the invocation's run id.
type Sweep struct {
	RunID    string
	Scenario string
	Analysis capacity.Analysis
}

// StepOf is a measured run as a step of a capacity sweep: its rates,
// latency at capacity.Percentiles, errors, whether it failed, and the
// resource use of the processes that say whether the system under test
// was what limited it — the load generator's and the app server's
// (against cpus, the cores each may use) and every proxy's.
func StepOf(r Run, cpus int) capacity.Step {
	s := capacity.Step{
		Label: r.Label, RequestedRPS: r.RequestedQPS, ActualRPS: r.ActualQPS,
		Connections: r.Connections, MeanMS: r.Latency.Avg,
		ErrorPercent: r.ErrorPercent, Failed: r.Failed, FailureReason: r.FailureReason,
	}
	for _, p := range capacity.Percentiles {
		s.Latency = append(s.Latency, capacity.PercentileMS{Percentile: p, MS: r.latencyAt(p)})
	}
	generator, server := RoleClientApp, RoleServerApp
	if r.Graph != nil {
		generator = RoleLoadGenerator
	}
	s.Generator = saturationOf(r.Process(generator))
	s.Generator.Cores, s.Generator.SendDelayP99MS = float64(cpus), r.SendDelayP99
	if r.Graph != nil {
		// A graph has no one server: the app that works hardest (the
		// entry service's, which every call reaches) is the one whose
		// saturation would cap the rate.
		s.Server = saturationOf(r.busiestApp())
	} else {
		s.Server = saturationOf(r.Process(server))
	}
	s.Server.Cores = float64(cpus)
	for _, p := range r.Processes {
		if kind := p.ProxyKind(); kind != "" {
			mem := p.PSSMB
			if math.IsNaN(mem) {
				mem = p.RSSMB
			}
			s.Proxies = append(s.Proxies, capacity.ProxyUsage{Role: p.Role, Kind: kind, VCPU: p.VCPU, MemMB: mem})
		}
	}
	return s
}

// latencyAt is the run's latency at percentile p, ms: from its spectrum
// when it holds p, else from its Latency fields (a run stored before
// spectra were), NaN when neither has it.
func (r Run) latencyAt(p float64) float64 {
	for _, pv := range r.Spectrum {
		if pv.Percentile == p {
			return pv.Ms
		}
	}
	l := r.Latency
	switch p {
	case 50:
		return l.P50
	case 75:
		return l.P75
	case 90:
		return l.P90
	case 99:
		return l.P99
	case 99.9:
		return l.P999
	case 99.99:
		return l.P9999
	}
	return math.NaN()
}

// busiestApp is the graph app process with the highest vCPU.
func (r Run) busiestApp() (Process, bool) {
	var best Process
	found := false
	for _, p := range r.Processes {
		if p.Role == RoleGraphApp && (!found || p.VCPU > best.VCPU || math.IsNaN(best.VCPU)) {
			best, found = p, true
		}
	}
	return best, found
}

// saturationOf is a process's vCPU, unknown when there is no such
// process; the caller knows its cores and send delay.
func saturationOf(p Process, found bool) capacity.Saturation {
	s := capacity.Saturation{VCPU: math.NaN(), SendDelayP99MS: math.NaN()}
	if found {
		s.VCPU = p.VCPU
	}
	return s
}
