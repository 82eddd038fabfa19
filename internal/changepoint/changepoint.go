// Package changepoint finds where a performance series changes level, so
// that a history of results flags the version that made things worse
// instead of comparing each point with a fixed threshold.
//
// The method is E-Divisive means (Matteson and James, "A Nonparametric
// Approach for Multiple Change Point Analysis of Multivariate Data", JASA
// 2014), as MongoDB's performance CI ("Change Point Detection in Software
// Performance Testing", ICPE 2020) and Apache Otava (formerly DataStax's
// Hunter) use it: the split of a segment that maximises the energy
// divergence between its two sides (alpha = 1) is the candidate, and a
// permutation test (the points shuffled within each segment) says whether
// so large a divergence could come from noise; accepted candidates split
// their segment and the search recurses. No well-kept Go library
// implements it, so it is written here; the statistic of every split of a
// segment is computed incrementally in O(n^2), and so is each permutation.
//
// A significant change smaller than a relative threshold is reported as a
// shift below threshold, not as an increase or decrease, as performance CI
// does so that noise does not raise alarms.
package changepoint

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Options tune the detection; DefaultOptions gives the usual values.
type Options struct {
	// Permutations is the number of shuffles in each permutation test;
	// the smallest p-value it can give is 1/(Permutations+1).
	Permutations int
	// Significance is the p-value at or below which a candidate is kept.
	Significance float64
	// MinSegment is the fewest points on each side of a change point
	// (at least 2: the statistic compares distances within each side).
	MinSegment int
	// Threshold is the relative change (0.05 = 5%) below which a
	// significant change is a ShiftBelowThreshold.
	Threshold float64
	// Seed seeds the permutations, so that a series always gives the same
	// result.
	Seed uint64
}

// DefaultOptions test at 0.01 with 999 permutations, stricter than ecp's
// (the method's authors' R package: 0.05, 199), because a performance
// series is read again after every run: at 0.05 one unchanged series in
// twenty raises an alarm, too often for a gate that runs daily. Three points
// a side, so that one bad run followed by a recovery is not a level shift,
// and a 5% threshold.
func DefaultOptions() Options {
	return Options{Permutations: 999, Significance: 0.01, MinSegment: 3, Threshold: 0.05, Seed: 1}
}

// Validate says which option is out of range, if one is.
func (o Options) Validate() error {
	switch {
	case o.Permutations < 1:
		return fmt.Errorf("permutations %d: want at least 1", o.Permutations)
	case !(o.Significance > 0 && o.Significance < 1):
		return fmt.Errorf("significance %v: want a p-value between 0 and 1", o.Significance)
	case o.MinSegment < 2:
		return fmt.Errorf("minimum segment %d: want at least 2 points", o.MinSegment)
	case !(o.Threshold >= 0) || math.IsInf(o.Threshold, 0):
		return fmt.Errorf("threshold %v: want a relative change of 0 or more", o.Threshold)
	}
	return nil
}

// MinPoints is the length below which even a clean step is expected to
// fail the permutation test: the most extreme arrangement of a series (every
// low point before every high one, or the reverse) is one of C(n, n/2)/2,
// and when that chance is above Significance so is the expected p-value.
// Shorter series can still pass by the draw of the shuffles, but not
// reliably. With the defaults it is 8.
func (o Options) MinPoints() int {
	for n := 2 * o.MinSegment; ; n++ {
		// 2 / C(n, n/2): the balanced split's two extreme arrangements.
		arrangements := 1.0
		for i := 1; i <= n/2; i++ {
			arrangements = arrangements * float64(n-n/2+i) / float64(i)
		}
		if 2/arrangements <= o.Significance && 1/float64(o.Permutations+1) <= o.Significance {
			return n
		}
		if n > 1<<16 { // Permutations too few for Significance: never.
			return math.MaxInt
		}
	}
}

// Shift is the kind of change a change point is.
type Shift string

const (
	Increase            Shift = "increase"
	Decrease            Shift = "decrease"
	ShiftBelowThreshold Shift = "shift below threshold"
)

// ChangePoint is a point where the series' level changes.
type ChangePoint struct {
	// Index is the first point of the new level, in the series as given
	// (missing points included).
	Index int
	// Before and After are the means of the segments on either side,
	// bounded by the neighbouring change points.
	Before, After float64
	// Relative is (After-Before)/|Before|; NaN when Before is 0.
	Relative float64
	// PValue is the permutation test's p-value for this split, and
	// Statistic the divergence that was tested.
	PValue, Statistic float64
	Shift             Shift
}

// Detect finds the change points of series, in index order. NaN and
// infinite points count as missing: they are left out of the statistic and
// of the means, and indices still refer to series. A series with fewer
// than 2*MinSegment usable points has none.
func Detect(series []float64, o Options) ([]ChangePoint, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var values []float64
	var at []int // at[i] is values[i]'s index in series
	for i, v := range series {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			values, at = append(values, v), append(at, i)
		}
	}
	splits := divide(values, o)
	cps := make([]ChangePoint, len(splits))
	for i, s := range splits {
		start, end := 0, len(values)
		if i > 0 {
			start = splits[i-1].index
		}
		if i+1 < len(splits) {
			end = splits[i+1].index
		}
		cp := ChangePoint{
			Index:     at[s.index],
			Before:    mean(values[start:s.index]),
			After:     mean(values[s.index:end]),
			PValue:    s.pValue,
			Statistic: s.statistic,
		}
		cp.Relative, cp.Shift = classify(cp.Before, cp.After, o.Threshold)
		cps[i] = cp
	}
	return cps, nil
}

func classify(before, after, threshold float64) (float64, Shift) {
	relative := math.NaN()
	if before != 0 {
		relative = (after - before) / math.Abs(before)
	}
	switch {
	case after == before:
		return relative, ShiftBelowThreshold
	case before != 0 && math.Abs(relative) < threshold:
		return relative, ShiftBelowThreshold
	case after > before:
		return relative, Increase
	}
	return relative, Decrease
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// split is an accepted change point during the search: the first index of
// its right-hand segment in the values searched.
type split struct {
	index             int
	statistic, pValue float64
}

// segment is a half-open range [start, end) of the values with its best
// split, found once.
type segment struct {
	start, end int
	best       int // -1: too short to split
	statistic  float64
}

// divide is E-Divisive's loop: take the best split over every segment,
// stop when the permutation test rejects it, else split and go on.
func divide(values []float64, o Options) []split {
	rng := rand.New(rand.NewPCG(o.Seed, 0x6d65736870657266)) // "meshperf": a fixed stream per seed
	segments := []segment{newSegment(values, 0, len(values), o.MinSegment)}
	var found []split
	shuffled := make([]float64, len(values))
	for {
		k := strongest(segments)
		if k < 0 {
			break
		}
		observed := segments[k].statistic
		atLeastAsLarge := 0
		for range o.Permutations {
			copy(shuffled, values)
			largest := math.Inf(-1)
			for _, s := range segments {
				part := shuffled[s.start:s.end]
				rng.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
				if _, q := bestSplit(shuffled, s.start, s.end, o.MinSegment); q > largest {
					largest = q
				}
			}
			if largest >= observed-1e-9*math.Abs(observed) { // equal up to rounding counts as equal
				atLeastAsLarge++
			}
		}
		p := float64(atLeastAsLarge+1) / float64(o.Permutations+1)
		if p > o.Significance {
			break
		}
		s := segments[k]
		found = append(found, split{index: s.best, statistic: observed, pValue: p})
		segments[k] = newSegment(values, s.start, s.best, o.MinSegment)
		segments = append(segments, newSegment(values, s.best, s.end, o.MinSegment))
	}
	slices.SortFunc(found, func(a, b split) int { return a.index - b.index })
	return found
}

func newSegment(values []float64, start, end, minSegment int) segment {
	best, q := bestSplit(values, start, end, minSegment)
	return segment{start: start, end: end, best: best, statistic: q}
}

// strongest is the index of the segment whose best split diverges most,
// -1 when none can be split.
func strongest(segments []segment) int {
	k := -1
	for i, s := range segments {
		if s.best >= 0 && (k < 0 || s.statistic > segments[k].statistic) {
			k = i
		}
	}
	return k
}

// bestSplit returns the split tau of x[start:end] (left x[start:tau],
// right x[tau:end], each at least minSegment long) that maximises
//
//	Q = m*n/(m+n) * (2/(m*n) * sum|l-r| - sum|l-l'|/C(m,2) - sum|r-r'|/C(n,2))
//
// (alpha = 1), and Q; -1 and -Inf when the segment is too short. The three
// sums are updated as tau moves one point right, O(n) each step.
func bestSplit(x []float64, start, end, minSegment int) (int, float64) {
	first, last := start+minSegment, end-minSegment
	if first > last {
		return -1, math.Inf(-1)
	}
	var within, cross, withinRight float64
	for i := start; i < end; i++ {
		for j := i + 1; j < end; j++ {
			d := math.Abs(x[i] - x[j])
			switch {
			case j < first:
				within += d
			case i >= first:
				withinRight += d
			default:
				cross += d
			}
		}
	}
	best, bestQ := -1, math.Inf(-1)
	for tau := first; ; tau++ {
		m, n := float64(tau-start), float64(end-tau)
		q := m * n / (m + n) * (2*cross/(m*n) - within/(m*(m-1)/2) - withinRight/(n*(n-1)/2))
		if q > bestQ {
			best, bestQ = tau, q
		}
		if tau == last {
			return best, bestQ
		}
		// x[tau] moves from the right side to the left.
		var toLeft, toRight float64
		for i := start; i < tau; i++ {
			toLeft += math.Abs(x[i] - x[tau])
		}
		for j := tau + 1; j < end; j++ {
			toRight += math.Abs(x[tau] - x[j])
		}
		within += toLeft
		withinRight -= toRight
		cross += toRight - toLeft
	}
}
