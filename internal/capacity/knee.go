package capacity

import (
	"fmt"
	"sort"
)

// KneeThreshold is the least normalised distance below the straight line
// from the curve's first point to its last that counts as a bend: a curve
// closer to that line than a tenth of its span is read as straight.
const KneeThreshold = 0.1

// KneeMinSteps is the fewest usable steps a knee is looked for in: with
// three, the middle one is the knee of any convex curve.
const KneeMinSteps = 4

// KneeMinRise is the least ratio of the last step's latency to the first's
// for a curve to be said to bend: below it, latency barely moved over the
// whole range and any "knee" would be noise.
const KneeMinRise = 1.5

// kneePoint is one usable step on a latency curve.
type kneePoint struct{ rps, ms float64 }

// findKnees finds the knee of each of CurvePercentiles' curves in steps.
func findKnees(steps []Step, judgements []Judgement) []Knee {
	knees := make([]Knee, 0, len(CurvePercentiles))
	for _, p := range CurvePercentiles {
		var points []kneePoint
		for i, s := range steps {
			ms, ok := s.At(p)
			if ok && usable(judgements[i]) && s.ActualRPS == s.ActualRPS {
				points = append(points, kneePoint{s.ActualRPS, ms})
			}
		}
		knees = append(knees, kneedle(p, points))
	}
	return knees
}

// kneedle finds where a convex increasing curve (latency against the
// actual rate) bends, after Satopää, Albrecht, Irwin and Raghavan,
// "Finding a 'Kneedle' in a Haystack: Detecting Knee Points in System
// Behavior" (ICDCS Workshops 2011): normalise both axes to [0, 1]; for a
// convex increasing curve the difference x − y is largest where the
// curve leaves the diagonal most, which is its knee. Written here rather
// than taken from a library because no maintained Go implementation
// exists, and the offline form needs only these few lines; the paper's
// online sensitivity S is replaced by the fixed KneeThreshold because a
// sweep's curve is complete when it is analysed.
func kneedle(p float64, points []kneePoint) Knee {
	knee := Knee{Percentile: p}
	if len(points) < KneeMinSteps {
		knee.Why = fmt.Sprintf("fewer than %d usable steps", KneeMinSteps)
		return knee
	}
	sort.SliceStable(points, func(i, j int) bool { return points[i].rps < points[j].rps })
	first, last := points[0], points[len(points)-1]
	flat := fmt.Sprintf("the curve does not bend within the measured range (p%s %s → %s ms)",
		formatPercentile(p), formatFigure(first.ms), formatFigure(last.ms))
	minMS, maxMS := first.ms, first.ms
	for _, pt := range points {
		minMS, maxMS = min(minMS, pt.ms), max(maxMS, pt.ms)
	}
	spanRPS, spanMS := last.rps-first.rps, maxMS-minMS
	if !(last.ms >= KneeMinRise*first.ms) || !(spanRPS > 0) || !(spanMS > 0) {
		knee.Why = flat
		return knee
	}
	best, bestD := -1, KneeThreshold
	for i, pt := range points {
		d := (pt.rps-first.rps)/spanRPS - (pt.ms-minMS)/spanMS
		if d > bestD {
			best, bestD = i, d
		}
	}
	if best < 0 {
		knee.Why = flat
		return knee
	}
	knee.Found, knee.RPS, knee.MS = true, points[best].rps, points[best].ms
	return knee
}
