package history

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// Metric is a figure a series can follow. Every one of them is worse when
// higher, so an increase beyond the threshold is a regression.
type Metric struct {
	Name string // as -metric takes it
	Unit string // as the table's header shows it
	// Decimals is how many the table shows: microseconds for latency, a
	// tenth of a MB for memory.
	Decimals int
	// NeedsBaseline says the figure is against the no-mesh runs of the same
	// invocation (added latency).
	NeedsBaseline bool
	// value reads a lab figure off one mode's medians at a point (the
	// summary's), or off the runs it kept; NaN when it has none.
	value func(m results.ModeResult, kept []results.Run) float64
	// controlPlane reads a control-plane figure off a cpload run (-cpload);
	// metrics have one of value and controlPlane.
	controlPlane func(results.ControlPlaneRun) float64
}

// ControlPlane says the metric is a cpload figure.
func (m Metric) ControlPlane() bool { return m.controlPlane != nil }

// Metrics are the figures history follows, in the order the help lists them.
var Metrics = []Metric{
	{Name: "p50", Unit: "ms", Decimals: 3, value: func(m results.ModeResult, _ []results.Run) float64 { return m.P50 }},
	{Name: "p90", Unit: "ms", Decimals: 3, value: func(m results.ModeResult, _ []results.Run) float64 { return m.P90 }},
	{Name: "p99", Unit: "ms", Decimals: 3, value: func(m results.ModeResult, _ []results.Run) float64 { return m.P99 }},
	// The summary has no P99.9; the median over the same kept runs is what
	// it would hold.
	{Name: "p999", Unit: "ms", Decimals: 3, value: func(_ results.ModeResult, kept []results.Run) float64 {
		v := make([]float64, len(kept))
		for i, r := range kept {
			v[i] = r.Latency.P999
		}
		return results.Median(v)
	}},
	{Name: "added-p50", Unit: "ms", Decimals: 3, NeedsBaseline: true, value: func(m results.ModeResult, _ []results.Run) float64 { return m.AddedP50 }},
	{Name: "added-p90", Unit: "ms", Decimals: 3, NeedsBaseline: true, value: func(m results.ModeResult, _ []results.Run) float64 { return m.AddedP90 }},
	{Name: "added-p99", Unit: "ms", Decimals: 3, NeedsBaseline: true, value: func(m results.ModeResult, _ []results.Run) float64 { return m.AddedP99 }},
	// Per proxy and per 1000 rps, as Istio's page gives it, so that runs at
	// "max" rate, whose actual rate differs, stay comparable.
	{Name: "vcpu", Unit: "vCPU per proxy per 1000 rps", Decimals: 3, value: func(m results.ModeResult, _ []results.Run) float64 { return m.VCPUPer1000RPS }},
	{Name: "mem", Unit: "MB per proxy", Decimals: 1, value: func(m results.ModeResult, _ []results.Run) float64 { return m.MBPerProxy }},
	// cpload's: the end-to-end time the simulated sidecars saw (a change
	// applied to the push received), the control plane's own convergence
	// time, and its pushes over the run.
	{Name: "e2e-p99", Unit: "ms", Decimals: 1, controlPlane: func(r results.ControlPlaneRun) float64 { return orNaN(r.E2EP99) }},
	{Name: "convergence-p99", Unit: "ms", Decimals: 1, controlPlane: func(r results.ControlPlaneRun) float64 { return orNaN(r.ConvergenceP99) }},
	{Name: "pushes", Unit: "pushes", Decimals: 1, controlPlane: func(r results.ControlPlaneRun) float64 { return orNaN(r.Pushes) }},
}

// DefaultControlPlaneMetric is -metric's default with -cpload.
const DefaultControlPlaneMetric = "e2e-p99"

func orNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// MetricNames lists the names of the lab's metrics or of cpload's, for
// help and errors.
func MetricNames(controlPlane bool) string {
	var names []string
	for _, m := range Metrics {
		if m.ControlPlane() == controlPlane {
			names = append(names, m.Name)
		}
	}
	return strings.Join(names, ", ")
}

// LookupMetric finds a metric by name.
func LookupMetric(name string) (Metric, error) {
	for _, m := range Metrics {
		if m.Name == name {
			return m, nil
		}
	}
	return Metric{}, selectionErrorf("unknown metric %q: want one of %s (with -cpload: %s)", name, MetricNames(false), MetricNames(true))
}

// GroupBy is what labels each point of a series.
type GroupBy string

const (
	ByVersion GroupBy = "version" // the data plane's version, else meshperf's
	ByCommit  GroupBy = "commit"  // meshperf's commit
	ByDate    GroupBy = "date"    // the day of the invocation's first run, UTC
)

// ParseGroupBy checks a -by value.
func ParseGroupBy(s string) (GroupBy, error) {
	switch g := GroupBy(s); g {
	case ByVersion, ByCommit, ByDate:
		return g, nil
	}
	return "", selectionErrorf("unknown grouping %q: want version, commit or date", s)
}

// group is the label of a point whose component under test (the data
// plane of a lab run, the control plane of a cpload run) is c, and which
// started at start.
func (g GroupBy) group(p results.Provenance, c results.Component, start time.Time) string {
	label := ""
	switch g {
	case ByVersion:
		label = c.Version
		if c.Name == "" || label == "" {
			label = p.Meshperf.Version
		}
	case ByCommit:
		label = p.Meshperf.Commit
		if len(label) > 12 {
			label = label[:12]
		}
		if label != "" && p.Meshperf.Modified {
			label += "-modified"
		}
	case ByDate:
		return start.UTC().Format("2006-01-02")
	}
	if label == "" {
		return "unrecorded"
	}
	return label
}

// SelectionError is a selection the store cannot answer (an unknown
// scenario, mode or machine, a cell that is not unique): bad input.
type SelectionError struct{ Msg string }

func (e SelectionError) Error() string { return e.Msg }

func selectionErrorf(format string, args ...any) error {
	return SelectionError{fmt.Sprintf(format, args...)}
}

// finite reports whether v is a usable figure.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func nan() float64 { return math.NaN() }
