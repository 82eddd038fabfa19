package results

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// section is a group of charts on the page.
type section struct {
	Heading string
	Charts  []chart
}

// metric is one figure a chart draws from a ModeResult. A proxy's figure
// (perWaypoint set) draws a mode's waypoint as a line of its own.
type metric struct {
	name, unit  string
	get         func(ModeResult) float64
	proxyOnly   bool
	perWaypoint func(ProxyCost) float64
}

var (
	latencyMetrics = []metric{
		{"P50 latency", "ms", func(m ModeResult) float64 { return m.P50 }, false, nil},
		{"P90 latency", "ms", func(m ModeResult) float64 { return m.P90 }, false, nil},
		{"P99 latency", "ms", func(m ModeResult) float64 { return m.P99 }, false, nil},
	}
	costMetrics = []metric{
		{"CPU per proxy", "vCPU", func(m ModeResult) float64 { return m.VCPUPerProxy }, true,
			func(c ProxyCost) float64 { return c.VCPU }},
		{"Memory per proxy", "MB (RSS)", func(m ModeResult) float64 { return m.MBPerProxy }, true,
			func(c ProxyCost) float64 { return c.MB }},
	}
)

// chartSections builds the report's charts. Every point of the matrix gets
// its own: what each mode adds to P50/P90/P99, each mode's latency
// spectrum, and CPU and memory per proxy, so a single-point run such as
// `quick` has its pictures too. Then, for the axes that vary, latency
// against connections (one set per rate), latency against rate (one set per
// connection count), and proxy CPU and memory against rate (or against
// connections when only they vary); runs at "max" rate have no place on a
// rate axis and are left off those. An axis with one value gets no section.
func chartSections(s Summary) ([]section, error) {
	var out []section
	for _, p := range s.Points {
		sec, err := pointSection(p)
		if err != nil {
			return nil, err
		}
		if len(sec.Charts) > 0 {
			out = append(out, sec)
		}
	}
	conns, rates := axisValues(s)
	add := func(heading, xLabel string, ms []metric, x axis, fixed []int, fixedFmt string) error {
		sec, err := seriesSection(heading, xLabel, s, ms, x, fixed, fixedFmt)
		out = append(out, sec)
		return err
	}
	var err error
	if len(conns) > 1 {
		err = errors.Join(err, add("Latency against connections", "connections", latencyMetrics, byConnections, rates, "at %s qps"))
	}
	if len(rates) > 1 {
		err = errors.Join(err, add("Latency against request rate", "requested rate (qps)", latencyMetrics, byRate, conns, "%s connections"))
	}
	switch {
	case !hasSidecarMode(s):
	case len(rates) > 1:
		err = errors.Join(err, add("Proxy CPU and memory against request rate", "requested rate (qps)", costMetrics, byRate, conns, "%s connections"))
	case len(conns) > 1:
		err = errors.Join(err, add("Proxy CPU and memory against connections", "connections", costMetrics, byConnections, rates, "at %s qps"))
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pointSection is one point's charts: added latency, spectrum, proxy cost.
func pointSection(p Point) (section, error) {
	sec := section{Heading: "At " + pointText(p)}
	if c, ok, err := addedLatencyChart(p); err != nil {
		return sec, err
	} else if ok {
		sec.Charts = append(sec.Charts, c)
	}
	if c, ok, err := spectrumChart(p); err != nil {
		return sec, err
	} else if ok {
		sec.Charts = append(sec.Charts, c)
	}
	cost, err := proxyCostCharts(p)
	sec.Charts = append(sec.Charts, cost...)
	return sec, err
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
				line, waypoint := series{name: mode}, series{name: mode + " " + ProxyWaypoint}
				for _, p := range s.Points {
					xv, fv := p.Connections, p.QPS
					if x == byRate {
						xv, fv = p.QPS, p.Connections
					}
					if fv != f || (x == byRate && xv == 0) {
						continue
					}
					mr, ok := p.mode(mode)
					if !ok {
						continue
					}
					line.xs = append(line.xs, float64(xv))
					line.ys = append(line.ys, m.get(mr))
					if c, ok := mr.proxyCost(ProxyWaypoint); ok && m.perWaypoint != nil {
						waypoint.xs = append(waypoint.xs, float64(xv))
						waypoint.ys = append(waypoint.ys, m.perWaypoint(c))
					}
				}
				for _, l := range []series{line, waypoint} {
					if len(l.xs) > 0 {
						ss = append(ss, l)
					}
				}
			}
			title := m.name + ", " + fmt.Sprintf(fixedFmt, QPSText(f))
			c, err := lineChart(title, xLabel, m.name+" ("+m.unit+")", ss)
			if err != nil {
				return sec, err
			}
			c.Kind = "against-" + map[axis]string{byConnections: "connections", byRate: "rate"}[x]
			sec.Charts = append(sec.Charts, c)
		}
	}
	return sec, nil
}

// proxyCost is the mode's cost of one kind of proxy, if it has that kind.
func (m ModeResult) proxyCost(kind string) (ProxyCost, bool) {
	for _, c := range m.Proxies {
		if c.Kind == kind {
			return c, true
		}
	}
	return ProxyCost{}, false
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
