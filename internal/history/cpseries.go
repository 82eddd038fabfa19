package history

import (
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// ControlPlaneQuery selects a series of cpload runs: one shape, one set of
// parameters (the provenance's hash: the same shape under other knobs or
// churn is another measurement), on one machine.
type ControlPlaneQuery struct {
	Shape   string
	Metric  Metric // one of the control-plane metrics
	By      GroupBy
	Machine string // as Query's
	Local   results.Machine
	// ParamsHash picks the parameters; "" takes the shape's only ones.
	ParamsHash string
}

// unrecordedParams names the parameters of runs stored before provenance.
const unrecordedParams = "unrecorded"

// BuildControlPlane makes the series of a cpload shape from the stored
// control-plane runs (oldest first, as the store returns them): one point
// per run, labelled by the control plane's version (else meshperf's),
// meshperf's commit or the date.
func BuildControlPlane(all []results.ControlPlaneRun, q ControlPlaneQuery) (Series, error) {
	s := Series{Scenario: q.Shape, Metric: q.Metric, By: q.By}
	var runs []results.ControlPlaneRun
	var shapes []string
	for _, r := range all {
		if r.Shape == q.Shape {
			runs = append(runs, r)
		}
		if !slices.Contains(shapes, r.Shape) {
			shapes = append(shapes, r.Shape)
		}
	}
	if len(runs) == 0 {
		held := "no cpload runs"
		if len(shapes) > 0 {
			held = "cpload runs of shapes " + strings.Join(shapes, ", ")
		}
		return s, selectionErrorf("unknown cpload shape %q: the store holds %s (cpload stores runs with -db)", q.Shape, held)
	}
	counts := map[string]int{}
	for _, r := range runs {
		counts[machineKey(r.Provenance.Machine)]++
	}
	var err error
	if s.Machine, s.MachineChoice, err = pickMachine(counts, q.Machine, q.Local, "cpload shape "+q.Shape); err != nil {
		return s, err
	}
	params := map[string]int{}
	var onMachine []results.ControlPlaneRun
	for _, r := range runs {
		if machineKey(r.Provenance.Machine) == s.Machine {
			onMachine = append(onMachine, r)
			params[paramsOf(r)]++
		}
	}
	switch {
	case q.ParamsHash != "" && params[q.ParamsHash] == 0:
		return s, selectionErrorf("-params %s: cpload shape %s ran with parameters %s", q.ParamsHash, q.Shape, countsText(params, "run"))
	case q.ParamsHash != "":
		s.ParamsHash = q.ParamsHash
	case len(params) > 1:
		return s, selectionErrorf("cpload shape %s ran with parameters %s; choose one with -params", q.Shape, countsText(params, "run"))
	default:
		s.ParamsHash = sortedByCount(params)[0]
	}
	for _, r := range onMachine {
		if paramsOf(r) != s.ParamsHash {
			continue
		}
		p := r.Provenance
		s.Points = append(s.Points, Point{Group: q.By.group(p, p.ControlPlane, r.Start), RunID: r.Label, Start: r.Start,
			Runs: 1, Value: q.Metric.controlPlane(r)})
	}
	return s, nil
}

func paramsOf(r results.ControlPlaneRun) string {
	if r.Provenance.ParamsHash == "" {
		return unrecordedParams
	}
	return r.Provenance.ParamsHash
}
