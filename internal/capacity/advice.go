package capacity

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// MarginResidualSDs is how many of a fit's residual standard deviations
// advice adds to the fitted value: two cover about 95% of the steps'
// scatter around the line.
const MarginResidualSDs = 2

// advise sizes each kind of proxy in one mode for the target rate.
func advise(c Curve, in Input) []Advice {
	var kinds []string
	for _, r := range proxyRoles(c.Steps) {
		if !slices.Contains(kinds, r.kind) {
			kinds = append(kinds, r.kind)
		}
	}
	capacity, metUpTo := capacityUnder(c.Steps, c.Judgements, nil)
	target := float64(in.TargetRPS)
	var advice []Advice
	for _, kind := range kinds {
		a := Advice{
			Mode:         c.Mode,
			Kind:         kind,
			Extrapolated: target > highestUsableRPS(c),
			MetHere:      metUpTo >= in.TargetRPS,
		}
		var cpuFit, memFit *Fit
		a.VCPU, a.MarginVCPU, cpuFit = reserve(c, kind, MetricVCPU, target)
		a.MemMB, a.MarginMB, memFit = reserve(c, kind, MetricMemMB, target)
		a.VCPU = roundUp(a.VCPU, 0.01)
		a.MemMB = roundUp(a.MemMB, 1)
		a.Evidence = measuredSentence(c, in, a.Extrapolated, cpuFit, memFit) + " " +
			objectivesSentence(c, in, capacity, a.MetHere)
		advice = append(advice, a)
	}
	return advice
}

// reserve is what to reserve of metric per proxy of kind at rps: the
// largest among the kind's roles of the fit plus its margin, never below
// the most any proxy of that kind was measured using at a rate up to rps
// (what was seen at higher rates says nothing against a lower target).
// Without a fit it is NaN.
func reserve(c Curve, kind, metric string, rps float64) (value, margin float64, fit *Fit) {
	value, margin = math.NaN(), math.NaN()
	for i := range c.Fits {
		f := &c.Fits[i]
		if f.Kind != kind || f.Metric != metric {
			continue
		}
		m := MarginResidualSDs * f.ResidualSD
		if v := f.At(rps) + m; fit == nil || v > value {
			value, margin, fit = v, m, f
		}
	}
	if fit == nil {
		return value, margin, nil
	}
	for i, s := range c.Steps {
		if !usable(c.Judgements[i]) || !(s.ActualRPS <= rps) {
			continue
		}
		for _, u := range s.Proxies {
			measured := u.VCPU
			if metric == MetricMemMB {
				measured = u.MemMB
			}
			if u.Kind == kind && measured > value {
				value = measured
			}
		}
	}
	return value, margin, fit
}

// measuredSentence says over which rates the advice was measured, on what
// machine, whether the target is beyond them and how good the fits are.
func measuredSentence(c Curve, in Input, extrapolated bool, cpuFit, memFit *Fit) string {
	machine := "this machine"
	if in.CPUs > 0 {
		machine = fmt.Sprintf("this %d-CPU machine", in.CPUs)
	}
	low, high := lowestUsableRPS(c), highestUsableRPS(c)
	if math.IsInf(low, 0) {
		return fmt.Sprintf("Nothing usable was measured through %s on %s.", c.Mode, machine)
	}
	s := fmt.Sprintf("Measured from %s to %s rps on %s", formatFigure(low), formatFigure(high), machine)
	if extrapolated {
		s += fmt.Sprintf("; beyond %s rps it is extrapolated", formatFigure(high))
	}
	return s + " (" + fitQuality("vCPU", cpuFit) + "; " + fitQuality("memory", memFit) + ")."
}

func fitQuality(what string, f *Fit) string {
	switch {
	case f == nil:
		return "no " + what + " fit: fewer than 2 rates measured it"
	case math.IsNaN(f.R2):
		return what + " flat across the range"
	}
	return fmt.Sprintf("%s fit R² %.2f", what, f.R2)
}

// objectivesSentence says whether the mode met the objectives at the
// target on this machine, and if not, how far it got.
func objectivesSentence(c Curve, in Input, capacity Capacity, metHere bool) string {
	held, within := "The objectives held", "within "+in.Objectives.String()
	if len(in.Objectives) == 0 {
		held, within = "The rate was kept without errors", "without errors"
	}
	target := fmt.Sprintf("the %d rps target", in.TargetRPS)
	switch {
	case metHere:
		return fmt.Sprintf("%s at %s here.", held, target)
	case capacity.NotMet:
		return fmt.Sprintf("Even the lowest rate failed %s here: this machine could not carry %s through %s.",
			strings.TrimPrefix(within, "within "), target, c.Mode)
	case capacity.LowerBound:
		return fmt.Sprintf("%s up to %s rps here, where the sweep ended (%s): whether this machine carries %s through %s %s is not known.",
			held, formatFigure(capacity.RPS), lowerBoundCause(c), target, c.Mode, within)
	}
	return fmt.Sprintf("%s up to %s rps here, below %s: this machine could not carry the target through %s %s.",
		held, formatFigure(capacity.RPS), target, c.Mode, within)
}

// roundUp rounds v up to a multiple of unit, forgiving the float error
// that would turn 0.3 vCPU into 0.31.
func roundUp(v, unit float64) float64 {
	if !finite(v) {
		return v
	}
	return math.Ceil(v/unit-1e-9) / (1 / unit)
}
