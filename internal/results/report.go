package results

import (
	"fmt"
	"math"
	"sort"
)

// section is a group of charts on the page, or a note saying why a group
// is missing.
type section struct {
	Heading string
	Note    string
	Charts  []chart
}

// metric is one figure a chart draws from a ModeResult.
type metric struct {
	name, unit string
	get        func(ModeResult) float64
	proxyOnly  bool
}

var (
	latencyMetrics = []metric{
		{"P50 latency", "ms", func(m ModeResult) float64 { return m.P50 }, false},
		{"P90 latency", "ms", func(m ModeResult) float64 { return m.P90 }, false},
		{"P99 latency", "ms", func(m ModeResult) float64 { return m.P99 }, false},
	}
	costMetrics = []metric{
		{"CPU per proxy", "vCPU", func(m ModeResult) float64 { return m.VCPUPerProxy }, true},
		{"Memory per proxy", "MB (RSS)", func(m ModeResult) float64 { return m.MBPerProxy }, true},
	}
)

// chartSections builds the charts for the axes that vary: latency against
// connections (one set per rate), latency against rate (one set per
// connection count), and proxy CPU and memory against rate (or against
// connections when only they vary). Runs at "max" rate have no place on a
// rate axis and are left off those charts.
func chartSections(s Summary) ([]section, error) {
	conns, rates := axisValues(s)
	var out []section
	if len(conns) > 1 {
		sec, err := seriesSection("Latency against connections", "connections", s, latencyMetrics,
			byConnections, rates, "at %s qps")
		if err != nil {
			return nil, err
		}
		out = append(out, sec)
	} else {
		out = append(out, section{Heading: "Latency against connections",
			Note: fmt.Sprintf("No chart: every run used %s, so there is no connection axis.", plural(first(conns), "connection"))})
	}
	if len(rates) > 1 {
		sec, err := seriesSection("Latency against request rate", "requested rate (qps)", s, latencyMetrics,
			byRate, conns, "%s connections")
		if err != nil {
			return nil, err
		}
		out = append(out, sec)
	} else {
		out = append(out, section{Heading: "Latency against request rate",
			Note: "No chart: the runs used a single request rate, so there is no rate axis."})
	}
	var cost section
	var err error
	switch {
	case !hasSidecarMode(s):
		cost = section{Heading: "Proxy CPU and memory", Note: "No chart: no mode with a sidecar was run."}
	case len(rates) > 1:
		cost, err = seriesSection("Proxy CPU and memory against request rate", "requested rate (qps)", s, costMetrics,
			byRate, conns, "%s connections")
	case len(conns) > 1:
		cost, err = seriesSection("Proxy CPU and memory against connections", "connections", s, costMetrics,
			byConnections, rates, "at %s qps")
	default:
		cost = section{Heading: "Proxy CPU and memory",
			Note: "No chart: a single point was run; the figures are in the summary table."}
	}
	if err != nil {
		return nil, err
	}
	return append(out, cost), nil
}

type axis int

const (
	byConnections axis = iota
	byRate
)

// seriesSection draws, for each value of the fixed axis and each metric, a
// chart with one line per mode along the varying axis.
func seriesSection(heading, xLabel string, s Summary, ms []metric, x axis, fixed []int, fixedFmt string) (section, error) {
	sec := section{Heading: heading}
	for _, f := range fixed {
		for _, m := range ms {
			var ss []series
			for _, mode := range s.Modes {
				if m.proxyOnly && mode == ModeNoMesh {
					continue
				}
				line := series{name: mode}
				for _, p := range s.Points {
					xv, fv := p.Connections, p.QPS
					if x == byRate {
						xv, fv = p.QPS, p.Connections
					}
					if fv != f || (x == byRate && xv == 0) {
						continue
					}
					if mr, ok := p.mode(mode); ok {
						line.xs = append(line.xs, float64(xv))
						line.ys = append(line.ys, m.get(mr))
					}
				}
				if len(line.xs) > 0 {
					ss = append(ss, line)
				}
			}
			title := m.name + ", " + fmt.Sprintf(fixedFmt, qpsText(f))
			c, err := lineChart(title, xLabel, m.name+" ("+m.unit+")", ss)
			if err != nil {
				return sec, err
			}
			sec.Charts = append(sec.Charts, c)
		}
	}
	return sec, nil
}

func (p Point) mode(m string) (ModeResult, bool) {
	for _, x := range p.Modes {
		if x.Mode == m {
			return x, true
		}
	}
	return ModeResult{}, false
}

// axisValues are the distinct connection counts and set rates (without
// "max") of the summary's points.
func axisValues(s Summary) (conns, rates []int) {
	cs, rs := map[int]bool{}, map[int]bool{}
	for _, p := range s.Points {
		cs[p.Connections] = true
		if p.QPS > 0 {
			rs[p.QPS] = true
		}
	}
	return sortedKeys(cs), sortedKeys(rs)
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func first(v []int) int {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func hasSidecarMode(s Summary) bool {
	for _, p := range s.Points {
		for _, m := range p.Modes {
			if !math.IsNaN(m.VCPUPerProxy) || !math.IsNaN(m.MBPerProxy) {
				return true
			}
		}
	}
	return false
}
