package compare

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// metricDef is how a row's metric is read off one repetition, given its
// invocation's no-mesh medians.
type metricDef struct {
	name, unit string
	get        func(r results.Run, base results.Latency) float64
	percentile float64 // for a latency percentile, 0-100; 0 otherwise
}

// latencyMetrics are every row's; addedMetrics a mesh mode's.
var (
	latencyMetrics = []metricDef{
		{"P50", "ms", func(r results.Run, _ results.Latency) float64 { return r.Latency.P50 }, 50},
		{"P90", "ms", func(r results.Run, _ results.Latency) float64 { return r.Latency.P90 }, 90},
		{"P99", "ms", func(r results.Run, _ results.Latency) float64 { return r.Latency.P99 }, 99},
		{"P99.9", "ms", func(r results.Run, _ results.Latency) float64 { return r.Latency.P999 }, 99.9},
	}
	addedMetrics = []metricDef{
		{"+P50", "ms", func(r results.Run, b results.Latency) float64 { return r.Latency.P50 - b.P50 }, 0},
		{"+P90", "ms", func(r results.Run, b results.Latency) float64 { return r.Latency.P90 - b.P90 }, 0},
		{"+P99", "ms", func(r results.Run, b results.Latency) float64 { return r.Latency.P99 - b.P99 }, 0},
	}
)

// proxyMetrics are the cost of one kind of proxy, per proxy.
func proxyMetrics(kind string) []metricDef {
	return []metricDef{
		{"vCPU/1k rps " + kind, "vCPU", func(r results.Run, _ results.Latency) float64 { return r.ProxyVCPUPer1000RPS(kind) }, 0},
		{"MB/proxy " + kind, "MB", func(r results.Run, _ results.Latency) float64 { v, _ := r.ProxyRSSMB(kind); return v }, 0},
	}
}

// rowMetrics are the metrics a cell's row has: latency, added latency for
// a mesh mode, and the cost of each kind of proxy either side ran.
func rowMetrics(mode string, a, b *cellRuns) []metricDef {
	defs := slices.Clone(latencyMetrics)
	if mode != results.ModeNoMesh {
		defs = append(defs, addedMetrics...)
	}
	for _, kind := range results.ProxyKinds {
		has := false
		for _, r := range slices.Concat(a.runs, b.runs) {
			if _, n := r.ProxyVCPU(kind); n > 0 {
				has = true
			}
		}
		if has {
			defs = append(defs, proxyMetrics(kind)...)
		}
	}
	return defs
}

func compareCell(cell Cell, a, b *cellRuns, opt Options) Row {
	row := Row{Cell: cell, Verdict: VerdictUnchanged}
	latA, latB := readSideLatency(a.runs), readSideLatency(b.runs)
	row.Latency = [2]*SideLatency{latA.chart(), latB.chart()}
	for _, d := range rowMetrics(cell.Mode, a, b) {
		m := compareMetric(d, a, b, opt)
		if m.A.N == 0 && m.B.N == 0 {
			continue // neither side has the figure: a mode without a no-mesh run to add to
		}
		if d.percentile > 0 && latA.ok() && latB.ok() {
			m.Histogram = &[2]PercentileEstimate{latA.estimate(d.percentile, opt.Confidence), latB.estimate(d.percentile, opt.Confidence)}
		}
		row.Verdict = worst(row.Verdict, m.Verdict)
		row.Metrics = append(row.Metrics, m)
	}
	return row
}

func compareMetric(d metricDef, a, b *cellRuns, opt Options) Metric {
	values := func(c *cellRuns) []float64 {
		v := make([]float64, len(c.runs))
		for i, r := range c.runs {
			v[i] = d.get(r, c.baselines[i])
		}
		return v
	}
	m := Metric{Name: d.name, Unit: d.unit, A: summarize(values(a)), B: summarize(values(b))}
	m.Diff = m.B.Mean - m.A.Mean
	m.DiffPct = Number(percentChange(float64(m.A.Mean), float64(m.B.Mean)))
	m.CI = welchInterval(m.A, m.B, opt.Confidence)
	m.Significant = m.CI.excludesZero()
	m.Verdict = verdict(m.A, m.B, m.CI, opt.ThresholdPct)
	return m
}

// sideNotes says plainly what differs between the sides besides the
// build under test: the machine, the scenario, its parameters, the
// network the pods were set up on. Runs that did not record a figure
// (stored before provenance) are left out of that figure's note.
func sideNotes(a, b Side) []string {
	var notes []string
	for _, d := range []struct {
		what string
		get  func(results.Run) string
	}{
		{"machines", func(r results.Run) string { return r.Provenance.Machine.Key() }},
		{"scenarios", func(r results.Run) string { return r.Scenario }},
		{"parameters", func(r results.Run) string { return r.Provenance.ParamsHash }},
		{"networks", func(r results.Run) string { return r.Network }},
	} {
		va, vb := distinct(a.Runs, d.get), distinct(b.Runs, d.get)
		if len(va) == 0 || len(vb) == 0 || slices.Equal(va, vb) {
			continue
		}
		if d.what == "machines" {
			va, vb = machines(a.Runs), machines(b.Runs)
		}
		notes = append(notes, fmt.Sprintf("compared across %s: A ran %s, B %s", d.what, strings.Join(va, "; "), strings.Join(vb, "; ")))
	}
	return notes
}

// machines are the runs' machines as the report writes them, "on ...".
func machines(rs []results.Run) []string {
	return distinct(rs, func(r results.Run) string {
		if r.Provenance.Machine.Key() == "" {
			return ""
		}
		return "on " + r.Provenance.Machine.String()
	})
}

// distinct is the sorted non-empty values of get over the runs.
func distinct(rs []results.Run, get func(results.Run) string) []string {
	var out []string
	for _, r := range rs {
		if v := get(r); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}
