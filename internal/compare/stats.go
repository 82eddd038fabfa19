package compare

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/meshperf/meshperf/internal/results"
)

// MinRepetitions is the fewest repetitions a side needs for a verdict:
// with two, a sample variance rests on one degree of freedom and Welch's
// interval is too wide (or, by luck, too narrow) to say anything.
const MinRepetitions = 3

// Verdicts, worst first: a row's verdict is the worst of its metrics'.
const (
	VerdictWorse     = "worse"
	VerdictTooFew    = "not enough repetitions (need >= 3)"
	VerdictUnchanged = "~"
	VerdictBetter    = "better"
)

// verdictRank orders verdicts from worst (0) to best.
func verdictRank(v string) int {
	switch v {
	case VerdictWorse:
		return 0
	case VerdictTooFew:
		return 1
	case VerdictUnchanged:
		return 2
	}
	return 3
}

// worst is the worse of two verdicts.
func worst(a, b string) string {
	if verdictRank(b) < verdictRank(a) {
		return b
	}
	return a
}

// SampleStats summarizes one side's repetitions of a metric.
type SampleStats struct {
	N      int       `json:"n"`
	Median Number    `json:"median"`
	Mean   Number    `json:"mean"`
	StdDev Number    `json:"stddev"` // sample standard deviation (n-1); NaN for n < 2
	Values []float64 `json:"values"` // the repetitions, in the order read
}

// summarize leaves out NaN values (a repetition without the figure).
func summarize(values []float64) SampleStats {
	var kept []float64
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			kept = append(kept, v)
		}
	}
	s := SampleStats{N: len(kept), Median: Number(math.NaN()), Mean: Number(math.NaN()), StdDev: Number(math.NaN()), Values: kept}
	if len(kept) == 0 {
		return s
	}
	s.Median = Number(results.Median(kept))
	mean, std := stat.MeanStdDev(kept, nil)
	s.Mean = Number(mean)
	if len(kept) > 1 {
		s.StdDev = Number(std)
	}
	return s
}

// Interval is a confidence interval, [Lo, Hi].
type Interval struct {
	Lo Number `json:"lo"`
	Hi Number `json:"hi"`
}

func nanInterval() Interval { return Interval{Number(math.NaN()), Number(math.NaN())} }

// excludesZero says the interval lies wholly on one side of 0.
func (i Interval) excludesZero() bool { return i.Lo > 0 || i.Hi < 0 }

// welchInterval is the confidence interval of mean(b) - mean(a) by Welch's
// t: no assumption that the two sides' variances are equal (a change can
// make a figure noisier as well as larger), with the Welch-Satterthwaite
// degrees of freedom. Both sides need two values or more; the interval is
// NaN otherwise. When neither side varies at all the interval is the
// difference itself.
func welchInterval(a, b SampleStats, confidence float64) Interval {
	if a.N < 2 || b.N < 2 {
		return nanInterval()
	}
	diff := float64(b.Mean - a.Mean)
	va := float64(a.StdDev*a.StdDev) / float64(a.N)
	vb := float64(b.StdDev*b.StdDev) / float64(b.N)
	se := math.Sqrt(va + vb)
	if se == 0 {
		return Interval{Number(diff), Number(diff)}
	}
	df := (va + vb) * (va + vb) / (va*va/float64(a.N-1) + vb*vb/float64(b.N-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-confidence)/2)
	return Interval{Number(diff - t*se), Number(diff + t*se)}
}

// verdict judges a metric for which higher is worse: "worse" when the
// whole interval of the difference lies above the threshold (percent of A's
// mean), i.e. B is worse than A by more than the threshold at the
// confidence level; "better" when it lies wholly below minus the
// threshold; "~" otherwise; too few repetitions on either side give no
// verdict. Asking the interval, not only its middle, to clear the
// threshold is what keeps the many metrics of a comparison quiet on an
// unchanged build: a chance difference must then be both significant and
// large, which on a shared machine's noise it rarely is, while a real
// regression of twice the threshold clears it with a few repetitions.
func verdict(a, b SampleStats, ci Interval, thresholdPct float64) string {
	margin := math.Abs(float64(a.Mean)) * thresholdPct / 100
	switch {
	case a.N < MinRepetitions || b.N < MinRepetitions:
		return VerdictTooFew
	case float64(ci.Lo) > margin:
		return VerdictWorse
	case float64(ci.Hi) < -margin:
		return VerdictBetter
	}
	return VerdictUnchanged
}

// percentChange is (b-a) as a percent of a; NaN when a is 0 or unknown.
func percentChange(a, b float64) float64 {
	if a == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return 100 * (b - a) / math.Abs(a)
}

// twoSidedZ is the standard normal quantile for a two-sided interval at
// the confidence level (1.96 at 95%).
func twoSidedZ(confidence float64) float64 {
	return distuv.UnitNormal.Quantile(1 - (1-confidence)/2)
}
