// Package history builds the series of one figure of one scenario across
// the lab's invocations on one machine, and finds where it changed: the
// query behind `meshperf history`. A point is one invocation (run id), the
// median over its repetitions as the lab's summary takes it; the change
// points come from internal/changepoint.
package history

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// Query selects a series.
type Query struct {
	Scenario string
	Metric   Metric
	By       GroupBy
	// Machine is a results.Machine Key(); "" picks the current machine's
	// when it has runs of the scenario, else the machine with most.
	Machine string
	Local   results.Machine // the machine history runs on
	// Mode, QPS and Connections pick the cell; "" and -1 pick the
	// scenario's mesh mode and its only rate and connection count.
	Mode             string
	QPS, Connections int
}

// Series is one figure over the invocations, oldest first.
type Series struct {
	Scenario    string // for a cpload series, the shape
	Mode        string
	QPS         int // requested; 0: as fast as possible
	Connections int
	// ParamsHash is a cpload series' parameters (the provenance's hash), in
	// place of a lab series' mode, rate and connections.
	ParamsHash string
	Metric     Metric
	By         GroupBy
	Machine    string
	// MachineChoice says how Machine was picked when the query left it
	// open.
	MachineChoice string
	Points        []Point
}

// Cell says what the points measure, for the output's first line.
func (s Series) Cell() string {
	if s.Metric.ControlPlane() {
		return "cpload shape " + s.Scenario + ", parameters " + s.ParamsHash
	}
	return fmt.Sprintf("%s: %s at %s qps, %d connections", s.Scenario, s.Mode, qpsText(s.QPS), s.Connections)
}

// Point is one invocation's figure.
type Point struct {
	Group string    // its version, commit or date
	RunID string    //
	Start time.Time // of its first run
	Runs  int       // repetitions kept (failed runs and runs over 10% errors are not)
	// Value is the median over the kept repetitions; NaN when there is
	// none (every repetition failed, or no no-mesh run to add to).
	Value float64
}

// unrecordedMachine names the machine of runs stored before provenance was.
const unrecordedMachine = "unrecorded"

func machineKey(m results.Machine) string {
	if k := m.Key(); k != "" {
		return k
	}
	return unrecordedMachine
}

// Build selects the query's runs from the runs of its scenario (in start
// order, as the store returns them) and makes the series.
func Build(runs []results.Run, q Query) (Series, error) {
	s := Series{Scenario: q.Scenario, Metric: q.Metric, By: q.By}
	if len(runs) == 0 {
		return s, selectionErrorf("scenario %q has no runs", q.Scenario)
	}
	counts := map[string]int{}
	for _, r := range runs {
		counts[machineKey(r.Provenance.Machine)]++
	}
	var err error
	if s.Machine, s.MachineChoice, err = pickMachine(counts, q.Machine, q.Local, q.Scenario); err != nil {
		return s, err
	}
	runs = slices.DeleteFunc(slices.Clone(runs), func(r results.Run) bool { return machineKey(r.Provenance.Machine) != s.Machine })
	if s.Mode, err = pickMode(runs, q); err != nil {
		return s, err
	}
	if s.QPS, s.Connections, err = pickCell(runs, s.Mode, q); err != nil {
		return s, err
	}
	inCell := func(r results.Run) bool { return r.RequestedQPS == s.QPS && r.Connections == s.Connections }
	var order []string
	byInvocation := map[string][]results.Run{}
	for _, r := range runs {
		if !inCell(r) || (r.Mode != s.Mode && r.Mode != results.ModeNoMesh) {
			continue
		}
		if _, seen := byInvocation[r.RunID]; !seen {
			order = append(order, r.RunID)
		}
		byInvocation[r.RunID] = append(byInvocation[r.RunID], r)
	}
	for _, id := range order {
		if p, ok := s.point(byInvocation[id]); ok {
			s.Points = append(s.Points, p)
		}
	}
	return s, nil
}

// point is an invocation's figure; false when the mode did not run in it.
func (s *Series) point(runs []results.Run) (Point, bool) {
	var mode []results.Run
	for _, r := range runs {
		if r.Mode == s.Mode {
			mode = append(mode, r)
		}
	}
	if len(mode) == 0 {
		return Point{}, false
	}
	// The mode's runs carry the data plane under test; no-mesh's have none.
	p := Point{Group: s.By.group(mode[0].Provenance, mode[0].Provenance.DataPlane, mode[0].StartTime), RunID: runs[0].RunID, Start: runs[0].StartTime, Value: nan()}
	kept := slices.DeleteFunc(mode, func(r results.Run) bool { return r.Excluded() != "" })
	sum := results.Summarize(runs)
	for _, pt := range sum.Points {
		for _, m := range pt.Modes {
			if m.Mode == s.Mode {
				p.Runs, p.Value = m.Runs, s.Metric.value(m, kept)
			}
		}
	}
	return p, true
}

// pickMachine is the machine asked for, or the current one's when it has
// runs, else the one with most runs, and how it was picked; counts are the
// runs of what (a scenario, a cpload shape) by machine.
func pickMachine(counts map[string]int, want string, local results.Machine, what string) (string, string, error) {
	if want != "" {
		if counts[want] == 0 {
			return "", "", selectionErrorf("no runs of %s on machine %q; it has runs on %s", what, want, countsText(counts, "run"))
		}
		return want, "", nil
	}
	here := machineKey(local)
	if counts[here] > 0 {
		if len(counts) == 1 {
			return here, "this machine", nil
		}
		return here, fmt.Sprintf("this machine; %s also has runs on %s (-machine)", what, countsText(otherThan(counts, here), "run")), nil
	}
	keys := sortedByCount(counts)
	return keys[0], fmt.Sprintf("the machine with most runs (%d); this machine has none", counts[keys[0]]), nil
}

// pickMode is the query's mode, or the scenario's mesh mode: both sidecars
// when it ran, else the first mode that is not no-mesh.
func pickMode(runs []results.Run, q Query) (string, error) {
	var modes []string
	for _, r := range runs {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	mode := q.Mode
	switch {
	case mode != "" && !slices.Contains(modes, mode):
		return "", selectionErrorf("unknown mode %q: %s ran %s", mode, q.Scenario, strings.Join(modes, ", "))
	case mode == "" && slices.Contains(modes, "both-sidecars"):
		mode = "both-sidecars"
	case mode == "":
		mode = modes[0]
		for _, m := range modes {
			if m != results.ModeNoMesh {
				mode = m
				break
			}
		}
	}
	if q.Metric.NeedsBaseline && mode == results.ModeNoMesh {
		return "", selectionErrorf("%s is what a mesh mode adds to no-mesh: choose a mesh mode with -mode (%s ran %s)",
			q.Metric.Name, q.Scenario, strings.Join(modes, ", "))
	}
	return mode, nil
}

// pickCell is the query's rate and connection count, or the mode's only
// ones.
func pickCell(runs []results.Run, mode string, q Query) (int, int, error) {
	qpsCounts, connCounts := map[string]int{}, map[string]int{}
	var qpsList, connList []int
	for _, r := range runs {
		if r.Mode != mode {
			continue
		}
		if !slices.Contains(qpsList, r.RequestedQPS) {
			qpsList = append(qpsList, r.RequestedQPS)
		}
		if !slices.Contains(connList, r.Connections) {
			connList = append(connList, r.Connections)
		}
		qpsCounts[qpsText(r.RequestedQPS)]++
		connCounts[strconv.Itoa(r.Connections)]++
	}
	qps, err := pickOne(qpsList, q.QPS, func() string {
		return fmt.Sprintf("%s ran %s at %s qps", q.Scenario, mode, joinInts(qpsList, qpsText))
	}, "-qps")
	if err != nil {
		return 0, 0, err
	}
	conn, err := pickOne(connList, q.Connections, func() string {
		return fmt.Sprintf("%s ran %s with %s connections", q.Scenario, mode, joinInts(connList, strconv.Itoa))
	}, "-conn")
	return qps, conn, err
}

// pickOne is want when it is among have, or have's only value when want is
// -1.
func pickOne(have []int, want int, ran func() string, flag string) (int, error) {
	slices.SortFunc(have, func(a, b int) int { return cmp.Compare(qpsOrder(a), qpsOrder(b)) })
	switch {
	case want >= 0 && !slices.Contains(have, want):
		return 0, selectionErrorf("%s %d: %s", flag, want, ran())
	case want >= 0:
		return want, nil
	case len(have) == 1:
		return have[0], nil
	}
	return 0, selectionErrorf("%s; choose one with %s", ran(), flag)
}

// qpsOrder sorts "max" (0) after every set rate, as the lab's tables do.
func qpsOrder(q int) int {
	if q == 0 {
		return int(^uint(0) >> 1)
	}
	return q
}

func qpsText(q int) string {
	if q == 0 {
		return "max"
	}
	return strconv.Itoa(q)
}

func joinInts(vs []int, text func(int) string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = text(v)
	}
	return strings.Join(s, ", ")
}

func sortedByCount(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	return keys
}

func otherThan(counts map[string]int, key string) map[string]int {
	out := map[string]int{}
	for k, n := range counts {
		if k != key {
			out[k] = n
		}
	}
	return out
}

// countsText is "A (3 runs), B (1 run)", most first.
func countsText(counts map[string]int, noun string) string {
	var parts []string
	for _, k := range sortedByCount(counts) {
		n := counts[k]
		unit := noun
		if n != 1 {
			unit += "s"
		}
		parts = append(parts, fmt.Sprintf("%s (%d %s)", k, n, unit))
	}
	return strings.Join(parts, ", ")
}
