package results

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// GraphFigures are what the summary adds for a mode's runs over a service
// graph, each the median over the repetitions. Latency there is end to end
// at the entrypoint, and one request at the entrypoint fans out into many
// hops, so the mesh's cost is given whole (every proxy of the graph) and
// per 1000 requests per second at the entrypoint, and the added latency
// also per hop.
type GraphFigures struct {
	Workload   string
	Entrypoint string
	Pods       int // the most any repetition had
	Hops       int // of the longest path, the load generator's hop counted
	// ErrorPercent is the share of entrypoint calls that failed.
	ErrorPercent float64
	// AddedPerHopP50/P90/P99 are the mode's added latency against no-mesh
	// divided by Hops: what the mesh adds at each pod-to-pod hop, if it
	// adds the same at each. NaN without a no-mesh run at the point.
	AddedPerHopP50, AddedPerHopP90, AddedPerHopP99 float64
	// Proxies counts the run's proxies: sidecars, node proxies, waypoint.
	Proxies int
	// MeshVCPU and MeshMB are the sum over all proxies (memory as
	// Process.memMB, MiB);
	// MeshVCPUPer1000RPS is MeshVCPU per 1000 requests per second at the
	// entrypoint. NaN for a mode without proxies.
	MeshVCPU, MeshMB, MeshVCPUPer1000RPS float64
	// ControlPlaneVCPU and ControlPlaneMB are meshperf pilot's; NaN when
	// the run measured none (no-mesh).
	ControlPlaneVCPU, ControlPlaneMB float64
	// AppsVCPU and AppsMB are the sum over the graph's apps.
	AppsVCPU, AppsMB float64
	// MBPerPod is a pod's memory, its app's plus its sidecar's (as
	// Process.memMB): the
	// median over the run's pods (then over repetitions), which is what a
	// pod's memory request would be sized by.
	MBPerPod     float64
	SetupSeconds float64
	// Services and Transactions are each one's median figures, in the
	// order of the first repetition's.
	Services     []ServiceFigures
	Transactions []TransactionFigures
}

// graphFigures summarises a mode's graph runs; nil when none of them ran
// over a graph.
func graphFigures(rs []Run) *GraphFigures {
	var gs []Run
	for _, r := range rs {
		if r.Graph != nil {
			gs = append(gs, r)
		}
	}
	if len(gs) == 0 {
		return nil
	}
	first := gs[0].Graph
	g := &GraphFigures{Workload: first.Workload, Entrypoint: first.Entrypoint}
	col := func(get func(Run) float64) float64 { return medianOf(gs, get) }
	for _, r := range gs {
		g.Pods, g.Hops = max(g.Pods, r.Graph.Pods), max(g.Hops, r.Graph.Hops)
		g.Proxies = max(g.Proxies, r.proxyCount())
	}
	g.ErrorPercent = col(func(r Run) float64 { return r.ErrorPercent })
	g.MeshVCPU = col(func(r Run) float64 { return r.sumOf(Process.isProxy, Process.vcpu) })
	g.MeshMB = col(func(r Run) float64 { return r.sumOf(Process.isProxy, Process.memMB) })
	g.MeshVCPUPer1000RPS = col(func(r Run) float64 {
		if r.ActualQPS <= 0 {
			return math.NaN()
		}
		return r.sumOf(Process.isProxy, Process.vcpu) / (r.ActualQPS / 1000)
	})
	isCP := func(p Process) bool { return p.Role == RoleControlPlane }
	isApp := func(p Process) bool { return p.Role == RoleGraphApp }
	g.ControlPlaneVCPU = col(func(r Run) float64 { return r.sumOf(isCP, Process.vcpu) })
	g.ControlPlaneMB = col(func(r Run) float64 { return r.sumOf(isCP, Process.memMB) })
	g.AppsVCPU = col(func(r Run) float64 { return r.sumOf(isApp, Process.vcpu) })
	g.AppsMB = col(func(r Run) float64 { return r.sumOf(isApp, Process.memMB) })
	g.MBPerPod = col(Run.medianPodMB)
	g.SetupSeconds = col(func(r Run) float64 { return r.Graph.SetupSeconds })
	g.Services = medianServices(gs)
	g.Transactions = medianTransactions(gs)
	g.AddedPerHopP50, g.AddedPerHopP90, g.AddedPerHopP99 = math.NaN(), math.NaN(), math.NaN()
	return g
}

// perHop divides the mode's added latency by the graph's hops.
func (g *GraphFigures) perHop(m ModeResult) {
	if g.Hops <= 0 {
		return
	}
	h := float64(g.Hops)
	g.AddedPerHopP50, g.AddedPerHopP90, g.AddedPerHopP99 = m.AddedP50/h, m.AddedP90/h, m.AddedP99/h
}

func (p Process) isProxy() bool { return p.ProxyKind() != "" }
func (p Process) vcpu() float64 { return p.VCPU }

// memMB is what the process adds to the machine's memory: its
// proportional set, where shared pages (the binary's, which every app or
// proxy of a graph maps) count once across the processes that share them,
// so that a graph's memory sums to what it really takes; RSS when PSS was
// not read. A hundred apps' RSS would count the same binary a hundred
// times.
func (p Process) memMB() float64 {
	if p.PSSMB > 0 {
		return p.PSSMB
	}
	return p.RSSMB
}
func (r Run) proxyCount() int { return r.countOf(Process.isProxy) }
func (r Run) countOf(pick func(Process) bool) int {
	n := 0
	for _, p := range r.Processes {
		if pick(p) {
			n++
		}
	}
	return n
}

// sumOf is the sum of get over the run's processes that pick keeps; NaN
// for none, so that a mode without proxies shows "-" rather than 0.
func (r Run) sumOf(pick func(Process) bool, get func(Process) float64) float64 {
	mean, n := r.meanOf(pick, get)
	return mean * float64(n)
}

// medianPodMB is the median over the run's pods of the pod's memory: its
// app's and its sidecar's memory (memMB) together.
func (r Run) medianPodMB() float64 {
	byPod := map[string]float64{}
	for _, p := range r.Processes {
		if p.Pod != "" && (p.Role == RoleGraphApp || p.Role == RoleGraphSidecar) {
			byPod[p.Pod] += p.memMB()
		}
	}
	v := make([]float64, 0, len(byPod))
	for _, mb := range byPod {
		v = append(v, mb)
	}
	return Median(v)
}

// medianServices is each service's figures, the median over the runs that
// have it.
func medianServices(rs []Run) []ServiceFigures {
	return mediansByName(rs, func(g *GraphRun) []ServiceFigures { return g.Services },
		func(s ServiceFigures) string { return s.Name },
		func(name string, have []ServiceFigures) ServiceFigures {
			sf := ServiceFigures{Name: name}
			for _, s := range have {
				sf.Replicas = max(sf.Replicas, s.Replicas)
			}
			sf.Requests = medianCount(have, func(s ServiceFigures) int64 { return s.Requests })
			sf.Errors = medianCount(have, func(s ServiceFigures) int64 { return s.Errors })
			sf.Latency = medianLatency(have, func(s ServiceFigures) Latency { return s.Latency })
			return sf
		})
}

// medianTransactions is each transaction's figures, the median over the
// runs that have it.
func medianTransactions(rs []Run) []TransactionFigures {
	return mediansByName(rs, func(g *GraphRun) []TransactionFigures { return g.Transactions },
		func(t TransactionFigures) string { return t.Name },
		func(name string, have []TransactionFigures) TransactionFigures {
			return TransactionFigures{Name: name,
				Count:   medianCount(have, func(t TransactionFigures) int64 { return t.Count }),
				Errors:  medianCount(have, func(t TransactionFigures) int64 { return t.Errors }),
				RPS:     Median(valuesOf(have, func(t TransactionFigures) float64 { return t.RPS })),
				Latency: medianLatency(have, func(t TransactionFigures) Latency { return t.Latency })}
		})
}

// mediansByName groups the rows list gives of each run's graph by name,
// in the order first seen, and makes one row of each group with median.
func mediansByName[T any](rs []Run, list func(*GraphRun) []T, name func(T) string, median func(string, []T) T) []T {
	var names []string
	groups := map[string][]T{}
	for _, r := range rs {
		for _, row := range list(r.Graph) {
			n := name(row)
			if _, seen := groups[n]; !seen {
				names = append(names, n)
			}
			groups[n] = append(groups[n], row)
		}
	}
	var out []T
	for _, n := range names {
		out = append(out, median(n, groups[n]))
	}
	return out
}

func valuesOf[T any](v []T, get func(T) float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		out = append(out, get(x))
	}
	return out
}

// medianCount is the median of a count, rounded to a whole one.
func medianCount[T any](v []T, get func(T) int64) int64 {
	m := Median(valuesOf(v, func(x T) float64 { return float64(get(x)) }))
	if math.IsNaN(m) {
		return 0
	}
	return int64(math.Round(m))
}

// medianLatency is each latency figure's median.
func medianLatency[T any](v []T, get func(T) Latency) Latency {
	var out Latency
	for i, dst := range latencyFields(&out) {
		*dst = Median(valuesOf(v, func(x T) float64 { l := get(x); return *latencyFields(&l)[i] }))
	}
	return out
}

// Graph is the first mode's graph figures, for the workload and
// entrypoint the report names; nil when no run went over a service graph.
func (s Summary) Graph() *GraphFigures {
	for _, p := range s.Points {
		for _, m := range p.Modes {
			if m.Graph != nil {
				return m.Graph
			}
		}
	}
	return nil
}

// writeGraphSummary prints, for runs over a service graph, what the
// two-pod table cannot say: the added latency per hop and the whole
// mesh's cost. Nothing for two-pod runs.
func writeGraphSummary(w io.Writer, s Summary, modeWidth int) {
	g := s.Graph()
	if g == nil {
		return
	}
	fmt.Fprintf(w, "\nservice graph %s, load at %s: latency is end to end at the entrypoint; per hop is the added latency divided by the %d hops of the longest path\n",
		g.Workload, g.Entrypoint, g.Hops)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "conn\tqps\t  %-*s\thops\t+P50/hop ms\t+P90/hop ms\t+P99/hop ms\terrors %%\t\n", modeWidth, "mode")
	eachGraphMode(s, func(p Point, m ModeResult, g *GraphFigures) {
		fmt.Fprintf(tw, "%d\t%s\t  %-*s\t%d\t%s\t%s\t%s\t%s\t\n", p.Connections, QPSText(p.QPS), modeWidth, m.Mode, g.Hops,
			added(m, g.AddedPerHopP50), added(m, g.AddedPerHopP90), added(m, g.AddedPerHopP99), f2(g.ErrorPercent))
	})
	tw.Flush()
	fmt.Fprintln(w, "\nwhole mesh's cost: every proxy of the graph (sidecars, node proxies, waypoint) summed; per 1000 rps at the entrypoint, into which every hop's work is counted")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "conn\tqps\t  %-*s\tpods\tproxies\tproxies vCPU\tvCPU/1k entry rps\tproxies MB\tcontrol plane vCPU\tcontrol plane MB\tapps vCPU\tapps MB\tMB/pod (PSS)\tsetup s\t\n", modeWidth, "mode")
	eachGraphMode(s, func(p Point, m ModeResult, g *GraphFigures) {
		fmt.Fprintf(tw, "%d\t%s\t  %-*s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Connections, QPSText(p.QPS), modeWidth, m.Mode,
			g.Pods, g.Proxies, f3(g.MeshVCPU), f3(g.MeshVCPUPer1000RPS), f1(g.MeshMB), f3(g.ControlPlaneVCPU), f1(g.ControlPlaneMB),
			f3(g.AppsVCPU), f1(g.AppsMB), f1(g.MBPerPod), f1(g.SetupSeconds))
	})
	tw.Flush()
}

// eachGraphMode calls f for each mode, at each point, that ran over a
// graph.
func eachGraphMode(s Summary, f func(Point, ModeResult, *GraphFigures)) {
	for _, p := range s.Points {
		for _, m := range p.Modes {
			if m.Graph != nil {
				f(p, m, m.Graph)
			}
		}
	}
}

func f2(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
