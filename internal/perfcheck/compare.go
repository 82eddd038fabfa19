package perfcheck

import (
	"encoding/json"
	"math"

	"golang.org/x/perf/benchmath"
)

// Verdict is what perfcheck concludes about one benchmark and unit.
type Verdict string

const (
	Worse  Verdict = "worse"  // significantly slower (or allocating more) beyond the threshold
	Better Verdict = "better" // significantly faster (or allocating less) beyond the threshold
	Same   Verdict = "same"   // no significant change, or one within the threshold
	New    Verdict = "new"    // no baseline for it: nothing to judge
	Gone   Verdict = "gone"   // in the baseline but no longer run
)

// Stats decide a verdict: how confident the test must be, and how large a
// change must be to count.
type Stats struct {
	// Confidence is the confidence level of the intervals and of the test,
	// from 0 to 1 (alpha is 1 - Confidence).
	Confidence float64
	// Threshold is the relative change of the point estimate (median) a
	// significant change must exceed to be worse or better: 0.1 is 10%.
	Threshold float64
}

// Estimate is a median with its confidence interval, in the unit's base
// (seconds, bytes, allocations).
type Estimate struct {
	Median float64 `json:"median"`
	Lo     float64 `json:"-"` // -Inf when too few runs for an interval
	Hi     float64 `json:"-"` // +Inf likewise
	// N is the number of runs (Go) or samples (criterion) it comes from.
	N int `json:"n"`
}

// Row is one benchmark and unit of a group, compared with its baseline.
type Row struct {
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	Baseline *Estimate `json:"baseline,omitempty"` // nil when new
	New      *Estimate `json:"new,omitempty"`      // nil when gone
	// Change is new/baseline - 1 of the medians (0.12 is 12% more); +Inf
	// when the baseline is 0 and the new figure is not; NaN for new and
	// gone rows.
	Change float64 `json:"-"`
	// P is the Mann-Whitney U test's p-value (Go); NaN when the test is
	// criterion's confidence interval of the change instead (Rust), and
	// for new and gone rows.
	P float64 `json:"-"`
	// ChangeLo and ChangeHi are criterion's confidence interval of the
	// change (Rust rows only).
	ChangeLo    float64  `json:"change_lo,omitempty"`
	ChangeHi    float64  `json:"change_hi,omitempty"`
	Significant bool     `json:"significant"`
	Verdict     Verdict  `json:"verdict"`
	Warnings    []string `json:"warnings,omitempty"`
}

// compareSamples compares two series of Go benchmark measurements as
// benchstat does: medians with their confidence intervals (no assumption
// about the distribution), and the Mann-Whitney U test for a difference.
func compareSamples(name, unit string, baseline, current []float64, st Stats) Row {
	th := benchmath.DefaultThresholds
	th.CompareAlpha = 1 - st.Confidence
	base := benchmath.NewSample(baseline, &th)
	cur := benchmath.NewSample(current, &th)
	bs := benchmath.AssumeNothing.Summary(base, st.Confidence)
	cs := benchmath.AssumeNothing.Summary(cur, st.Confidence)
	cmp := benchmath.AssumeNothing.Compare(base, cur)
	row := Row{Name: name, Unit: unit,
		Baseline: &Estimate{Median: bs.Center, Lo: bs.Lo, Hi: bs.Hi, N: len(baseline)},
		New:      &Estimate{Median: cs.Center, Lo: cs.Lo, Hi: cs.Hi, N: len(current)},
		Change:   relativeChange(bs.Center, cs.Center),
		P:        cmp.P,
	}
	row.Significant = cmp.P < cmp.Alpha
	row.Verdict = judge(row.Significant, row.Change, st.Threshold)
	for _, warns := range [][]error{base.Warnings, cur.Warnings, bs.Warnings, cs.Warnings, cmp.Warnings} {
		for _, w := range warns {
			row.Warnings = append(row.Warnings, w.Error())
		}
	}
	return row
}

// relativeChange is current/baseline - 1, with 0 -> 0 no change and
// 0 -> something an infinite increase (an allocation where there was none).
func relativeChange(baseline, current float64) float64 {
	switch {
	case baseline == current:
		return 0
	case baseline == 0:
		return math.Inf(1)
	}
	return current/baseline - 1
}

// judge turns a test's outcome into a verdict: significance says whether
// there is a change at all, the threshold whether it is large enough to
// matter on a machine whose figures drift with its other load.
func judge(significant bool, change, threshold float64) Verdict {
	switch {
	case !significant:
		return Same
	case change > threshold:
		return Worse
	case change < -threshold:
		return Better
	}
	return Same
}

// compareSets compares a package's new Go results with its baseline, row
// by row: each benchmark (in the order they ran, then the baseline's gone
// ones) and each compared unit it reports. withGone is false when -bench
// selected some benchmarks, so that those not selected are not called gone.
func compareSets(baseline, current *BenchSet, st Stats, withGone bool) []Row {
	var rows []Row
	var curNames, baseNames []string
	var curValues, baseValues map[sampleKey][]float64
	if current != nil {
		curNames, curValues = current.samples()
	}
	if baseline != nil {
		baseNames, baseValues = baseline.samples()
	}
	for _, name := range curNames {
		for _, unit := range comparedUnits {
			cur, ok := curValues[sampleKey{name, unit}]
			if !ok {
				continue
			}
			base, ok := baseValues[sampleKey{name, unit}]
			if !ok {
				rows = append(rows, Row{Name: name, Unit: unit, New: estimateOnly(cur, st), P: math.NaN(), Change: math.NaN(), Verdict: New})
				continue
			}
			rows = append(rows, compareSamples(name, unit, base, cur, st))
		}
	}
	if !withGone {
		return rows
	}
	for _, name := range baseNames {
		for _, unit := range comparedUnits {
			base, ok := baseValues[sampleKey{name, unit}]
			if _, ran := curValues[sampleKey{name, unit}]; !ok || ran {
				continue
			}
			rows = append(rows, Row{Name: name, Unit: unit, Baseline: estimateOnly(base, st), P: math.NaN(), Change: math.NaN(), Verdict: Gone})
		}
	}
	return rows
}

// estimateOnly is the median and interval of a series with nothing to
// compare it with.
func estimateOnly(values []float64, st Stats) *Estimate {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(values, &benchmath.DefaultThresholds), st.Confidence)
	return &Estimate{Median: s.Center, Lo: s.Lo, Hi: s.Hi, N: len(values)}
}

// MarshalJSON writes the interval's bounds only when they are finite (JSON
// has no infinity).
func (e Estimate) MarshalJSON() ([]byte, error) {
	type plain Estimate
	return json.Marshal(struct {
		plain
		Lo *float64 `json:"lo,omitempty"`
		Hi *float64 `json:"hi,omitempty"`
	}{plain(e), finite(e.Lo), finite(e.Hi)})
}

// MarshalJSON writes the change and the p-value only when they are finite:
// a new or gone row has neither, a Rust row has no p-value, an allocation
// where there was none is an infinite change.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	return json.Marshal(struct {
		plain
		Change *float64 `json:"change,omitempty"`
		P      *float64 `json:"p,omitempty"`
	}{plain(r), finite(r.Change), finite(r.P)})
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
