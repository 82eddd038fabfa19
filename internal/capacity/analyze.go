package capacity

import (
	"fmt"
	"math"
	"sort"
)

// AllObjectives is the Capacity.Objective of the capacity under every
// objective together (or, without objectives, of the saturation rate).
const AllObjectives = "all"

// Analyze analyses a finished sweep: each mode's steps judged, their
// knees, capacities and proxy fits; the capacity each mode loses against
// the baseline; and, for a target rate, the sizing advice.
func Analyze(in Input) Analysis {
	a := Analysis{
		Objectives: in.Objectives,
		TargetRPS:  in.TargetRPS,
		Baseline:   in.Baseline,
		CPUs:       in.CPUs,
		Curves:     []Curve{},
	}
	for _, m := range in.Modes {
		a.Curves = append(a.Curves, analyzeMode(m, in.Objectives))
	}
	a.Losses = losses(a.Curves, in.Baseline)
	if in.TargetRPS > 0 {
		for _, c := range a.Curves {
			a.Advice = append(a.Advice, advise(c, in)...)
		}
	}
	return a
}

func analyzeMode(m ModeSteps, objs Objectives) Curve {
	steps := append([]Step(nil), m.Steps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].RequestedRPS < steps[j].RequestedRPS })
	c := Curve{Mode: m.Mode, Steps: steps, StopReason: m.StopReason, Judgements: make([]Judgement, len(steps))}
	for i, s := range steps {
		c.Judgements[i] = Judge(s, objs)
	}
	c.Knees = findKnees(steps, c.Judgements)
	c.Capacity, _ = capacityUnder(steps, c.Judgements, nil)
	c.Capacity.Objective = AllObjectives
	for _, o := range objs {
		capacity, _ := capacityUnder(steps, c.Judgements, &o)
		capacity.Objective = o.String()
		c.PerObjective = append(c.PerObjective, capacity)
	}
	c.Fits = fitProxies(steps, c.Judgements)
	return c
}

// capacityUnder walks the steps by requested rate to the first usable one
// that misses the objective (every objective when o is nil), and returns
// the capacity with the highest requested rate that met it. A step that
// saw errors or could not keep its rate misses every objective: what it
// measured is not a rate the system carried.
func capacityUnder(steps []Step, judgements []Judgement, o *Objective) (Capacity, int) {
	var c Capacity
	highestRequested, met := 0, 0
	for i, s := range steps {
		j := judgements[i]
		if !usable(j) {
			continue
		}
		if misses(j, o) {
			c.NextRPS, c.NotMet = s.RequestedRPS, met == 0
			return c, highestRequested
		}
		met++
		if s.ActualRPS > c.RPS {
			c.RPS = s.ActualRPS
		}
		highestRequested = max(highestRequested, s.RequestedRPS)
	}
	c.LowerBound = true
	return c, highestRequested
}

func misses(j Judgement, o *Objective) bool {
	switch j.Verdict {
	case ErrorsSeen, RateNotKept:
		return true
	case WithinObjectives:
		return false
	}
	if o == nil {
		return true
	}
	for _, b := range j.Broken {
		if b == *o {
			return true
		}
	}
	return false
}

// losses are each mode's capacity lost against the baseline's.
func losses(curves []Curve, baseline string) []Loss {
	var base *Curve
	for i := range curves {
		if curves[i].Mode == baseline {
			base = &curves[i]
		}
	}
	if base == nil || !measuredAny(*base) {
		return nil
	}
	var out []Loss
	for _, c := range curves {
		if c.Mode == baseline || !measuredAny(c) {
			continue
		}
		loss := Loss{Mode: c.Mode, RPS: base.Capacity.RPS - c.Capacity.RPS}
		if base.Capacity.RPS > 0 {
			loss.Percent = 100 * loss.RPS / base.Capacity.RPS
		}
		loss.Approximate = base.Capacity.LowerBound || c.Capacity.LowerBound
		switch {
		case base.Capacity.LowerBound && c.Capacity.LowerBound:
			loss.Note = fmt.Sprintf("both capacities are lower bounds (%s: %s; %s: %s), so the loss is not known",
				baseline, lowerBoundCause(*base), c.Mode, lowerBoundCause(c))
		case base.Capacity.LowerBound:
			loss.Note = fmt.Sprintf("%s's capacity is a lower bound (%s), so the loss is at least %s rps",
				baseline, lowerBoundCause(*base), formatFigure(loss.RPS))
		case c.Capacity.LowerBound:
			loss.Note = fmt.Sprintf("%s's capacity is a lower bound (%s), so the loss is at most %s rps",
				c.Mode, lowerBoundCause(c), formatFigure(loss.RPS))
		}
		out = append(out, loss)
	}
	return out
}

// lowerBoundCause says why a curve's sweep ended before its capacity was
// reached.
func lowerBoundCause(c Curve) string {
	for _, j := range c.Judgements {
		if j.Verdict == GeneratorBound {
			return "the load generator was the limit"
		}
	}
	return "the range ended first"
}

// highestUsableRPS is the highest actual rate of a usable step.
func highestUsableRPS(c Curve) float64 {
	highest := 0.0
	for i, s := range c.Steps {
		if usable(c.Judgements[i]) && s.ActualRPS > highest {
			highest = s.ActualRPS
		}
	}
	return highest
}

// lowestUsableRPS is the lowest actual rate of a usable step.
func lowestUsableRPS(c Curve) float64 {
	lowest := math.Inf(1)
	for i, s := range c.Steps {
		if usable(c.Judgements[i]) && s.ActualRPS < lowest {
			lowest = s.ActualRPS
		}
	}
	return lowest
}

// measuredAny says the curve has a usable step, so its capacity says
// something about the mode.
func measuredAny(c Curve) bool {
	return !math.IsInf(lowestUsableRPS(c), 0)
}
