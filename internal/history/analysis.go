package history

import (
	"errors"
	"math"

	"github.com/meshperf/meshperf/internal/changepoint"
)

// MinPoints is the fewest points history runs change-point detection on;
// with fewer it prints the series and says so.
const MinPoints = 3

// ErrTooFewPoints is Analyze's error for a series shorter than MinPoints;
// the Analysis is still filled with the series.
var ErrTooFewPoints = errors.New("not enough points for change-point detection (need >= 3)")

// Verdicts of a change point. Every metric is worse when higher.
const (
	Regression          = "regression"
	Improvement         = "improvement"
	ShiftBelowThreshold = string(changepoint.ShiftBelowThreshold)
)

// Change is a change point of a series, in the series' terms.
type Change struct {
	// Index is the series' first point at the new level (Series.Points).
	Index int
	// GroupBefore and GroupAfter label the points on either side of it:
	// the last point with a value before it, and it.
	GroupBefore, GroupAfter string
	RunIDBefore, RunIDAfter string
	// Before and After are the means of the segments on either side;
	// Absolute is After-Before, Relative the same over Before (NaN when
	// Before is 0).
	Before, After, Absolute, Relative float64
	PValue                            float64
	Verdict                           string // Regression, Improvement or ShiftBelowThreshold
}

// Analysis is a series with its change points.
type Analysis struct {
	Series  Series
	Options changepoint.Options
	// Detected says change-point detection ran (the series had at least
	// MinPoints points); Changes is empty otherwise.
	Detected bool
	Changes  []Change
	// ShortForSignificance is set when the series has fewer points than a
	// clean step needs to pass the permutation test (Options.MinPoints).
	ShortForSignificance bool
}

// Regressed says whether the newest change point beyond the threshold is a
// regression: the series' current level is worse than the one before. A
// shift below the threshold is not an alarm, so it neither raises nor
// clears one.
func (a Analysis) Regressed() bool {
	for i := len(a.Changes) - 1; i >= 0; i-- {
		switch a.Changes[i].Verdict {
		case Regression:
			return true
		case Improvement:
			return false
		}
	}
	return false
}

// Size is the change relative to the level before it, as the output
// writes it ("+23.6%", "n/a %" from a level of 0).
func (c Change) Size() string { return percent(c.Relative) }

// Analyze finds the series' change points. A series shorter than
// MinPoints gives ErrTooFewPoints (the Analysis holds the series); bad
// options give their error.
func Analyze(s Series, o changepoint.Options) (Analysis, error) {
	a := Analysis{Series: s, Options: o}
	values := make([]float64, len(s.Points))
	present := 0
	for i, p := range s.Points {
		values[i] = p.Value
		if finite(p.Value) {
			present++
		}
	}
	if present < MinPoints {
		return a, ErrTooFewPoints
	}
	cps, err := changepoint.Detect(values, o)
	if err != nil {
		return a, err
	}
	a.Detected = true
	a.ShortForSignificance = present < o.MinPoints()
	for _, cp := range cps {
		c := Change{
			Index: cp.Index, Before: cp.Before, After: cp.After, Absolute: cp.After - cp.Before,
			Relative: cp.Relative, PValue: cp.PValue,
			GroupAfter: s.Points[cp.Index].Group, RunIDAfter: s.Points[cp.Index].RunID,
		}
		for i := cp.Index - 1; i >= 0; i-- {
			if finite(s.Points[i].Value) {
				c.GroupBefore, c.RunIDBefore = s.Points[i].Group, s.Points[i].RunID
				break
			}
		}
		switch cp.Shift {
		case changepoint.Increase:
			c.Verdict = Regression
		case changepoint.Decrease:
			c.Verdict = Improvement
		default:
			c.Verdict = ShiftBelowThreshold
		}
		a.Changes = append(a.Changes, c)
	}
	return a, nil
}

// orNil keeps JSON encodable: NaN and infinities become null.
func orNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
