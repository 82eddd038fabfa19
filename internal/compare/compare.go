// Package compare says, with statistics, whether one set of runs (B)
// performs differently from another (A): for each mode, protocol, rate,
// connection count and payload both sides measured, the latency
// percentiles, the latency the mesh adds against no-mesh and what each
// kind of proxy costs, each side's repetitions summarized, the difference
// B-A with Welch's confidence interval, and a verdict (worse, better, or
// no significant change beyond a threshold). `meshperf compare` prints the
// Report as a table, as JSON, or as an HTML page.
package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/meshperf/meshperf/internal/results"
)

// Options are the comparison's statistical settings.
type Options struct {
	Confidence   float64 // of the intervals, a fraction (0.95)
	ThresholdPct float64 // smallest change, percent of A, that earns a verdict
}

// DefaultOptions are the defaults of `meshperf compare`: 95% intervals and
// a 5% threshold, below which a change is not called worse or better even
// when it is significant.
var DefaultOptions = Options{Confidence: 0.95, ThresholdPct: 5}

// Side is one side of a comparison: the selector and the runs it resolved
// to, which may come from several invocations (their repetitions pool).
type Side struct {
	Selector string
	Runs     []results.Run
}

// Report is a comparison's result; -json writes it as is.
type Report struct {
	Confidence   float64     `json:"confidence"`    // fraction, 0.95
	ThresholdPct float64     `json:"threshold_pct"` // percent of A
	A            SideSummary `json:"a"`
	B            SideSummary `json:"b"`
	// Notes say plainly what differs between the sides that could explain
	// a difference besides the change under test (machine, scenario).
	Notes   []string `json:"notes"`
	Rows    []Row    `json:"rows"`
	OnlyInA []Cell   `json:"only_in_a"`
	OnlyInB []Cell   `json:"only_in_b"`
	// Verdict is the worst row's verdict; "~" without rows.
	Verdict string `json:"verdict"`
}

// SideSummary is what a side is made of.
type SideSummary struct {
	Selector    string     `json:"selector"`
	Runs        int        `json:"runs"`        // runs resolved, excluded ones included
	Invocations []string   `json:"invocations"` // their run ids, in order
	Scenarios   []string   `json:"scenarios"`
	Excluded    []Excluded `json:"excluded"`
	// Provenance is each distinct provenance among the side's runs.
	Provenance []results.Provenance `json:"provenance"`
}

// Excluded is a run left out, as results.Run.Excluded says.
type Excluded struct {
	Label  string `json:"label"`
	Reason string `json:"reason"`
}

// Cell is a point of the matrix that a row compares.
type Cell struct {
	Mode         string `json:"mode"`
	Protocol     string `json:"protocol"`
	RequestedQPS int    `json:"requested_qps"` // 0: as fast as possible
	Connections  int    `json:"connections"`
	PayloadBytes int    `json:"payload_bytes"`
}

func (c Cell) String() string {
	return fmt.Sprintf("%s %s, %d conn, %s qps, %d B", c.Mode, c.Protocol, c.Connections, results.QPSText(c.RequestedQPS), c.PayloadBytes)
}

// Row is one cell's comparison.
type Row struct {
	Cell
	Verdict string   `json:"verdict"` // the worst of its metrics'
	Metrics []Metric `json:"metrics"`
	// Latency is each side's pooled latency distribution, for the charts;
	// nil for a side whose runs have neither histogram nor spectrum.
	Latency [2]*SideLatency `json:"latency"`
}

// Metric is one figure of a row, compared.
type Metric struct {
	Name string      `json:"name"` // P50, +P90, vCPU/1k rps sidecar, ...
	Unit string      `json:"unit"` // ms, vCPU, MB
	A    SampleStats `json:"a"`
	B    SampleStats `json:"b"`
	// Diff is mean(B) - mean(A), DiffPct the same as a percent of A's mean,
	// CI Welch's interval of Diff.
	Diff        Number   `json:"diff"`
	DiffPct     Number   `json:"diff_pct"`
	CI          Interval `json:"ci"`
	Significant bool     `json:"significant"`
	Verdict     string   `json:"verdict"`
	// Histogram is, for a latency percentile, each side's percentile of
	// its pooled calls with the distribution-free interval; shown beside
	// the verdict, not used for it.
	Histogram *[2]PercentileEstimate `json:"histogram,omitempty"`
}

// PercentileEstimate is a percentile of a side's pooled distribution.
type PercentileEstimate struct {
	Value  Number   `json:"value"`
	CI     Interval `json:"ci"`
	Calls  int64    `json:"calls"`
	Source string   `json:"source"` // SourceHistogram, SourceSpectrum or SourceMixed
}

// Compare compares side B against side A.
func Compare(a, b Side, opt Options) Report {
	rep := Report{Confidence: opt.Confidence, ThresholdPct: opt.ThresholdPct, Verdict: VerdictUnchanged}
	cellsA, sumA := groupSide(a)
	cellsB, sumB := groupSide(b)
	rep.A, rep.B = sumA, sumB
	for _, cell := range sortedCells(cellsA, cellsB) {
		ra, inA := cellsA[cell]
		rb, inB := cellsB[cell]
		switch {
		case !inA:
			rep.OnlyInB = append(rep.OnlyInB, cell)
		case !inB:
			rep.OnlyInA = append(rep.OnlyInA, cell)
		default:
			row := compareCell(cell, ra, rb, opt)
			rep.Verdict = worst(rep.Verdict, row.Verdict)
			rep.Rows = append(rep.Rows, row)
		}
	}
	rep.Notes = sideNotes(a, b)
	return rep
}

// cellRuns are a side's kept runs at a cell, each with the no-mesh
// medians of its own invocation at the same point (NaN without them).
type cellRuns struct {
	runs      []results.Run
	baselines []results.Latency
}

// groupSide leaves out excluded runs (counting them) and groups the rest
// by cell. A mesh run's added latency is taken against its own
// invocation's no-mesh median, so that two invocations pooled on a side
// (on different days, say) each keep their own baseline.
func groupSide(s Side) (map[Cell]*cellRuns, SideSummary) {
	sum := SideSummary{Selector: s.Selector, Runs: len(s.Runs)}
	type point struct {
		runID string
		cell  Cell // without the mode
	}
	cells := map[Cell]*cellRuns{}
	noMesh := map[point][]results.Run{}
	var kept []results.Run
	for _, r := range s.Runs {
		if !slices.Contains(sum.Invocations, r.RunID) {
			sum.Invocations = append(sum.Invocations, r.RunID)
		}
		if r.Scenario != "" && !slices.Contains(sum.Scenarios, r.Scenario) {
			sum.Scenarios = append(sum.Scenarios, r.Scenario)
		}
		if !slices.Contains(sum.Provenance, r.Provenance) {
			sum.Provenance = append(sum.Provenance, r.Provenance)
		}
		if why := r.Excluded(); why != "" {
			sum.Excluded = append(sum.Excluded, Excluded{Label: r.Label, Reason: why})
			continue
		}
		kept = append(kept, r)
		if r.Mode == results.ModeNoMesh {
			p := point{r.RunID, cellOf(r)}
			p.cell.Mode = ""
			noMesh[p] = append(noMesh[p], r)
		}
	}
	for _, r := range kept {
		c := cellOf(r)
		if cells[c] == nil {
			cells[c] = &cellRuns{}
		}
		p := point{r.RunID, c}
		p.cell.Mode = ""
		cells[c].runs = append(cells[c].runs, r)
		cells[c].baselines = append(cells[c].baselines, medianLatency(noMesh[p]))
	}
	return cells, sum
}

func cellOf(r results.Run) Cell {
	return Cell{Mode: r.Mode, Protocol: r.Protocol, RequestedQPS: r.RequestedQPS, Connections: r.Connections, PayloadBytes: r.PayloadSize}
}

// medianLatency is the median P50, P90 and P99 over runs; NaN for none.
func medianLatency(rs []results.Run) results.Latency {
	med := func(get func(results.Run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		return results.Median(v)
	}
	nan := math.NaN()
	return results.Latency{Min: nan, Max: nan, Avg: nan, P75: nan, P999: nan, P9999: nan,
		P50: med(func(r results.Run) float64 { return r.Latency.P50 }),
		P90: med(func(r results.Run) float64 { return r.Latency.P90 }),
		P99: med(func(r results.Run) float64 { return r.Latency.P99 })}
}

// sortedCells is every cell of either side, as tables list them:
// protocol, connections, rate (max last), payload, then mode.
func sortedCells(a, b map[Cell]*cellRuns) []Cell {
	var out []Cell
	for _, m := range []map[Cell]*cellRuns{a, b} {
		for c := range m {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		switch {
		case x.Protocol != y.Protocol:
			return x.Protocol < y.Protocol
		case x.Connections != y.Connections:
			return x.Connections < y.Connections
		case x.RequestedQPS != y.RequestedQPS:
			return results.QPSOrder(x.RequestedQPS) < results.QPSOrder(y.RequestedQPS)
		case x.PayloadBytes != y.PayloadBytes:
			return x.PayloadBytes < y.PayloadBytes
		case results.ModeRank(x.Mode) != results.ModeRank(y.Mode):
			return results.ModeRank(x.Mode) < results.ModeRank(y.Mode)
		}
		return x.Mode < y.Mode
	})
	return out
}
