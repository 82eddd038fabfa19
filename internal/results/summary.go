package results

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/capacity"
)

// Summary is the scenario's result in the form of Istio's performance page:
// for each (connections, qps) point and mode, latency and what the mesh
// adds to it against no-mesh, and what each proxy costs.
type Summary struct {
	Scenario string
	RunID    string
	Network  string   // "netns", "loopback", or both joined with "+" if runs differ
	Modes    []string // in the order first seen
	Points   []Point  // by connections, then qps
	Excluded []Excluded
	// Machine is the runs' machine (their provenance's, the first run's
	// that has one); WriteHTML fills it from this host if none does.
	Machine Machine
	// Provenance is what the runs recorded about their builds, mesh,
	// parameters, labels and machines.
	Provenance RunsProvenance
	// Sweep is the capacity analysis when the runs are a sweep's steps
	// (Summarize leaves it nil: the lab, or whoever read the sweep from the
	// store, sets it); reports then show its curves, knees, capacities and
	// advice.
	Sweep *Sweep
}

// Point is one (connections, requested qps) cell of the matrix.
type Point struct {
	Connections int
	QPS         int // requested; 0: as fast as possible
	Modes       []ModeResult
}

// ModeResult is one mode at one point: medians over the repetitions that
// were kept. Latencies are ms; NaN means unavailable.
type ModeResult struct {
	Mode      string
	Runs      int     // repetitions included
	ActualQPS float64 // median
	P50       float64
	P90       float64
	P99       float64
	// Added latency against no-mesh at the same point: the difference of the
	// medians (repetitions are not paired). NaN when the point has no
	// no-mesh run, so the table says "n/a" rather than invent a baseline.
	AddedP50 float64
	AddedP90 float64
	AddedP99 float64
	// Per proxy, the mean over the run's sidecars or node proxies (the
	// proxies at the pods' ends of the path), then the median over
	// repetitions: vCPU, vCPU per 1000 rps of actual rate, RSS MiB. NaN
	// when the mode has neither. A waypoint is in Proxies only.
	VCPUPerProxy   float64
	VCPUPer1000RPS float64
	MBPerProxy     float64
	// The lowest and highest repetition of the figures the report draws
	// with whiskers: added latency (each repetition against no-mesh's
	// median), vCPU and MB per proxy. With one repetition both ends are the
	// median; NaN where the figure is.
	AddedP50Span, AddedP90Span, AddedP99Span Span
	VCPUSpan, MBSpan                         Span
	// Spectrum is the latency at SpectrumPercentiles, each the median over
	// repetitions; nil when the runs have none.
	Spectrum []PercentileValue
	// Proxies are what each kind of proxy on the mode's path costs, in
	// ProxyKinds' order; none for a mode without proxies.
	Proxies []ProxyCost
	// Graph is what runs over a service graph add (graphsummary.go); nil
	// for two-pod runs.
	Graph *GraphFigures
}

// ProxyCost is what one kind of proxy costs in a mode at a point: the mean
// over the run's proxies of that kind, then the median over repetitions.
type ProxyCost struct {
	Kind           string // ProxySidecar, ProxyNodeProxy or ProxyWaypoint
	Count          int    // proxies of the kind in a run (the most any repetition had)
	VCPU           float64
	VCPUPer1000RPS float64
	MB             float64 // RSS MiB
	VCPUSpan       Span
	MBSpan         Span
}

// Span is the range of a figure over repetitions.
type Span struct{ Lo, Hi float64 }

// Excluded is a run left out of the summary, with the reason.
type Excluded struct {
	Label  string
	Mode   string
	Reason string
}

// Summarize groups the runs by point and mode, leaves out failed runs and
// runs with more than MaxErrorPercent errors (listing them, as Istio drops
// them), and takes medians over repetitions.
func Summarize(runs []Run) Summary {
	s := Summary{Provenance: ProvenanceOf(runs)}
	type key struct{ conn, qps int }
	groups := map[key]map[string][]Run{}
	networks := map[string]bool{}
	for _, r := range runs {
		if s.Scenario == "" {
			s.Scenario, s.RunID = r.Scenario, r.RunID
		}
		if s.Machine == (Machine{}) {
			s.Machine = r.Provenance.Machine
		}
		if r.Network != "" && !networks[r.Network] {
			networks[r.Network] = true
			s.Network = joinNonEmpty(s.Network, r.Network)
		}
		if !contains(s.Modes, r.Mode) {
			s.Modes = append(s.Modes, r.Mode)
		}
		if why := r.Excluded(); why != "" {
			s.Excluded = append(s.Excluded, Excluded{Label: r.Label, Mode: r.Mode, Reason: why})
			continue
		}
		k := key{r.Connections, r.RequestedQPS}
		if groups[k] == nil {
			groups[k] = map[string][]Run{}
		}
		groups[k][r.Mode] = append(groups[k][r.Mode], r)
	}
	for k, byMode := range groups {
		p := Point{Connections: k.conn, QPS: k.qps}
		base, hasBase := byMode[ModeNoMesh]
		var baseRes ModeResult
		if hasBase {
			baseRes = modeResult(ModeNoMesh, base)
		}
		for _, m := range s.Modes {
			rs, ok := byMode[m]
			if !ok {
				continue
			}
			mr := modeResult(m, rs)
			mr.AddedP50, mr.AddedP90, mr.AddedP99 = math.NaN(), math.NaN(), math.NaN()
			nan := Span{math.NaN(), math.NaN()}
			mr.AddedP50Span, mr.AddedP90Span, mr.AddedP99Span = nan, nan, nan
			if hasBase {
				mr.AddedP50 = mr.P50 - baseRes.P50
				mr.AddedP90 = mr.P90 - baseRes.P90
				mr.AddedP99 = mr.P99 - baseRes.P99
				mr.AddedP50Span = spanOf(rs, func(r Run) float64 { return r.Latency.P50 - baseRes.P50 })
				mr.AddedP90Span = spanOf(rs, func(r Run) float64 { return r.Latency.P90 - baseRes.P90 })
				mr.AddedP99Span = spanOf(rs, func(r Run) float64 { return r.Latency.P99 - baseRes.P99 })
			}
			if mr.Graph != nil && m != ModeNoMesh {
				mr.Graph.perHop(mr)
			}
			p.Modes = append(p.Modes, mr)
		}
		s.Points = append(s.Points, p)
	}
	sortModes(s.Modes)
	for _, p := range s.Points {
		sort.SliceStable(p.Modes, func(i, j int) bool { return ModeRank(p.Modes[i].Mode) < ModeRank(p.Modes[j].Mode) })
	}
	sort.Slice(s.Points, func(i, j int) bool {
		a, b := s.Points[i], s.Points[j]
		if a.Connections != b.Connections {
			return a.Connections < b.Connections
		}
		return QPSOrder(a.QPS) < QPSOrder(b.QPS)
	})
	return s
}

// modeOrder is the order tables and legends show modes in: the baseline
// first, then the mesh growing around it.
var modeOrder = []string{ModeNoMesh, "server-sidecar", "client-sidecar", "both-sidecars",
	"ambient", "ambient-ztunnel", "ambient-waypoint", "ambient-waypoint-ztunnel"}

// ModeRank is the mode's place in modeOrder (unknown modes last), for
// sorting modes as tables and legends show them.
func ModeRank(m string) int {
	for i, x := range modeOrder {
		if x == m {
			return i
		}
	}
	return len(modeOrder)
}

func sortModes(m []string) {
	sort.SliceStable(m, func(i, j int) bool { return ModeRank(m[i]) < ModeRank(m[j]) })
}

// QPSOrder is a requested rate's sort key: "max" (0) after every set rate.
func QPSOrder(q int) int {
	if q == 0 {
		return math.MaxInt
	}
	return q
}

func modeResult(mode string, rs []Run) ModeResult {
	col := func(get func(Run) float64) float64 { return medianOf(rs, get) }
	vcpu := func(r Run) float64 { v, _ := r.SidecarVCPU(); return v }
	mb := func(r Run) float64 { v, _ := r.SidecarRSSMB(); return v }
	return ModeResult{
		Mode:           mode,
		Runs:           len(rs),
		ActualQPS:      col(func(r Run) float64 { return r.ActualQPS }),
		P50:            col(func(r Run) float64 { return r.Latency.P50 }),
		P90:            col(func(r Run) float64 { return r.Latency.P90 }),
		P99:            col(func(r Run) float64 { return r.Latency.P99 }),
		VCPUPerProxy:   col(vcpu),
		VCPUPer1000RPS: col(Run.VCPUPer1000RPS),
		MBPerProxy:     col(mb),
		VCPUSpan:       spanOf(rs, vcpu),
		MBSpan:         spanOf(rs, mb),
		Spectrum:       medianSpectrum(rs),
		Proxies:        proxyCosts(rs),
		Graph:          graphFigures(rs),
	}
}

// proxyCosts gives each kind of proxy the runs have its figures.
func proxyCosts(rs []Run) []ProxyCost {
	var out []ProxyCost
	for _, kind := range ProxyKinds {
		count := 0
		for _, r := range rs {
			_, n := r.ProxyVCPU(kind)
			count = max(count, n)
		}
		if count == 0 {
			continue
		}
		vcpu := func(r Run) float64 { v, _ := r.ProxyVCPU(kind); return v }
		mb := func(r Run) float64 { v, _ := r.ProxyRSSMB(kind); return v }
		per1k := func(r Run) float64 { return r.ProxyVCPUPer1000RPS(kind) }
		out = append(out, ProxyCost{Kind: kind, Count: count, VCPU: medianOf(rs, vcpu), VCPUPer1000RPS: medianOf(rs, per1k),
			MB: medianOf(rs, mb), VCPUSpan: spanOf(rs, vcpu), MBSpan: spanOf(rs, mb)})
	}
	return out
}

// medianOf is the median of get over the runs.
func medianOf(rs []Run, get func(Run) float64) float64 {
	v := make([]float64, 0, len(rs))
	for _, r := range rs {
		v = append(v, get(r))
	}
	return Median(v)
}

// spanOf is the lowest and highest value of get over the runs, leaving out
// NaN; NaN at both ends when every value is.
func spanOf(rs []Run, get func(Run) float64) Span {
	s := Span{math.NaN(), math.NaN()}
	for _, r := range rs {
		v := get(r)
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(s.Lo) || v < s.Lo {
			s.Lo = v
		}
		if math.IsNaN(s.Hi) || v > s.Hi {
			s.Hi = v
		}
	}
	return s
}

// Median of the values that are not NaN; NaN if there are none. An even
// count takes the mean of the middle two.
func Median(v []float64) float64 { return capacity.Median(v) }

// WriteSummary prints the summary as an aligned table.
func WriteSummary(w io.Writer, s Summary) error {
	ew := &errWriter{w: w}
	title := "meshperf lab"
	if s.Scenario != "" {
		title += ": " + s.Scenario
	}
	if s.Network != "" {
		title += " (" + s.Network + ")"
	}
	fmt.Fprintf(ew, "%s: latency (median of repetitions) and what the mesh adds against no-mesh\n", title)
	if line := s.Provenance.Line(); line != "" {
		fmt.Fprintf(ew, "provenance: %s\n", line)
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The mode column reads better left-aligned; tabwriter aligns every
	// column one way, so pad it here.
	mw := len("mode")
	for _, m := range s.Modes {
		mw = max(mw, len(m))
	}
	fmt.Fprintf(tw, "conn\tqps\t  %-*s\truns\tP50 ms\tP90 ms\tP99 ms\t+P50 ms\t+P90 ms\t+P99 ms\tvCPU/proxy\tvCPU/1k rps\tMB/proxy\t\n", mw, "mode")
	for _, p := range s.Points {
		for _, m := range p.Modes {
			fmt.Fprintf(tw, "%d\t%s\t  %-*s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				p.Connections, QPSText(p.QPS), mw, m.Mode, m.Runs, f3(m.P50), f3(m.P90), f3(m.P99),
				added(m, m.AddedP50), added(m, m.AddedP90), added(m, m.AddedP99),
				f3(m.VCPUPerProxy), f3(m.VCPUPer1000RPS), f1(m.MBPerProxy))
		}
	}
	tw.Flush()
	if len(s.Points) == 0 {
		fmt.Fprintln(ew, "no runs to summarize")
	}
	if s.AmbientProxies() {
		writeProxyCosts(ew, s, mw)
	}
	writeGraphSummary(ew, s, mw)
	if s.noBaseline() {
		fmt.Fprintln(ew, "n/a: no no-mesh run at that point, so the added latency is unavailable")
	}
	if len(s.Excluded) > 0 {
		fmt.Fprintf(ew, "left out (failed, or more than %d%% errors): %d run(s)\n", MaxErrorPercent, len(s.Excluded))
		for _, e := range s.Excluded {
			fmt.Fprintf(ew, "  %s: %s\n", e.Label, e.Reason)
		}
	}
	return ew.err
}

// AmbientProxies says whether some mode has node proxies or a waypoint,
// whose costs the summary then gives per kind of proxy: the main table's
// per-proxy figures are the node proxies', and a waypoint, in the middle
// of the path, costs something else again.
func (s Summary) AmbientProxies() bool {
	for _, p := range s.Points {
		for _, m := range p.Modes {
			for _, c := range m.Proxies {
				if c.Kind != ProxySidecar {
					return true
				}
			}
		}
	}
	return false
}

// writeProxyCosts prints each mode's cost per kind of proxy, as Istio's page
// gives it: per sidecar, per node proxy (ztunnel), per waypoint.
func writeProxyCosts(w io.Writer, s Summary, modeWidth int) {
	fmt.Fprintf(w, "\ncost per proxy, by kind (mean over a run's proxies of the kind, median of repetitions)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "conn\tqps\t  %-*s\t  %-10s\tproxies\tvCPU\tvCPU/1k rps\tMB\t\n", modeWidth, "mode", "proxy")
	for _, p := range s.Points {
		for _, m := range p.Modes {
			for _, c := range m.Proxies {
				fmt.Fprintf(tw, "%d\t%s\t  %-*s\t  %-10s\t%d\t%s\t%s\t%s\t\n", p.Connections, QPSText(p.QPS), modeWidth, m.Mode,
					c.Kind, c.Count, f3(c.VCPU), f3(c.VCPUPer1000RPS), f1(c.MB))
			}
		}
	}
	tw.Flush()
}

func added(m ModeResult, v float64) string {
	if m.Mode == ModeNoMesh {
		return "-"
	}
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%+.3f", v)
}

// QPSText writes a requested rate, "max" for as fast as possible.
func QPSText(q int) string {
	if q == 0 {
		return "max"
	}
	return fmt.Sprint(q)
}

func f3(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func f1(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// errWriter keeps the first write error so the table code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return strings.Join([]string{a, b}, "+")
}

// noBaseline says some mode at some point has no no-mesh run to compare with.
func (s Summary) noBaseline() bool {
	for _, p := range s.Points {
		for _, m := range p.Modes {
			if m.Mode != ModeNoMesh && math.IsNaN(m.AddedP90) {
				return true
			}
		}
	}
	return false
}
