package compare

import (
	"math"
	"sort"

	"github.com/meshperf/meshperf/internal/results"
)

// Where a side's latency distribution was read from.
const (
	SourceHistogram = "histogram" // every repetition's load result file
	SourceSpectrum  = "spectrum"  // the stored percentiles, interpolated
	SourceMixed     = "histogram+spectrum"
)

// cdf is one run's latency distribution: the fraction of calls at or below
// xs[i] ms is fs[i], linear in between. From a histogram the points are
// the bucket edges; from a stored spectrum they are its percentiles, with
// the run's minimum and maximum as 0 and 1.
type cdf struct {
	calls  int64
	xs, fs []float64
}

func (c cdf) at(x float64) float64 {
	i := sort.SearchFloat64s(c.xs, x)
	switch {
	case i == 0:
		if x < c.xs[0] {
			return 0
		}
		return c.fs[0]
	case i == len(c.xs):
		return 1
	}
	x0, x1, f0, f1 := c.xs[i-1], c.xs[i], c.fs[i-1], c.fs[i]
	if x1 == x0 {
		return f1
	}
	return f0 + (f1-f0)*(x-x0)/(x1-x0)
}

// cdfFromHistogram reads a run's histogram; false when it has no calls.
func cdfFromHistogram(bs []results.HistogramBucket) (cdf, bool) {
	var c cdf
	for _, b := range bs {
		c.calls += b.Count
	}
	if c.calls == 0 || len(bs) == 0 {
		return c, false
	}
	c.xs, c.fs = append(c.xs, bs[0].StartMs), append(c.fs, 0)
	seen := int64(0)
	for _, b := range bs {
		seen += b.Count
		c.add(b.EndMs, float64(seen)/float64(c.calls))
	}
	return c, true
}

// cdfFromSpectrum interpolates a run's stored percentiles; false when it
// has none.
func cdfFromSpectrum(r results.Run) (cdf, bool) {
	c := cdf{calls: r.Calls - r.Errors}
	if len(r.Spectrum) == 0 || c.calls <= 0 {
		return c, false
	}
	if !math.IsNaN(r.Latency.Min) {
		c.add(r.Latency.Min, 0)
	}
	for _, pv := range r.Spectrum {
		c.add(pv.Ms, pv.Percentile/100)
	}
	if !math.IsNaN(r.Latency.Max) {
		c.add(r.Latency.Max, 1)
	}
	return c, len(c.xs) > 1
}

// add appends a point, keeping both coordinates non-decreasing (a
// percentile list rounded by its writer may step back by a hair).
func (c *cdf) add(x, f float64) {
	if n := len(c.xs); n > 0 {
		x, f = math.Max(x, c.xs[n-1]), math.Max(f, c.fs[n-1])
	}
	c.xs, c.fs = append(c.xs, x), append(c.fs, f)
}

// pooled is a side's repetitions as one distribution: each run's
// distribution weighted by its calls, as if all the calls had been made in
// one run.
type pooled struct {
	runs   []cdf
	calls  int64
	lo, hi float64
}

func newPooled(cs []cdf) pooled {
	p := pooled{runs: cs, lo: math.Inf(1), hi: math.Inf(-1)}
	for _, c := range cs {
		p.calls += c.calls
		p.lo, p.hi = math.Min(p.lo, c.xs[0]), math.Max(p.hi, c.xs[len(c.xs)-1])
	}
	return p
}

func (p pooled) at(x float64) float64 {
	sum := 0.0
	for _, c := range p.runs {
		sum += float64(c.calls) * c.at(x)
	}
	return sum / float64(p.calls)
}

// quantile is the latency (ms) below which the fraction q of the pooled
// calls fall. The pooled distribution is a mixture with no closed-form
// inverse, so it is found by bisection on its (monotone) CDF.
func (p pooled) quantile(q float64) float64 {
	lo, hi := p.lo, p.hi
	for range 100 {
		mid := (lo + hi) / 2
		if p.at(mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// percentileInterval is the distribution-free confidence interval of the
// pooled distribution's percentile pct (0-100) from order statistics: of
// N calls, the rank of the percentile is N*p, and the rank of the sample's
// percentile varies around it as a binomial count, so the ranks
// N*p -+ z*sqrt(N*p*(1-p)) bound it at the confidence level; the interval
// is the latencies at those ranks. It reflects only the sampling of calls
// within the runs, not the difference between runs.
func (p pooled) percentileInterval(pct, confidence float64) (value float64, ci Interval) {
	n, q := float64(p.calls), pct/100
	spread := twoSidedZ(confidence) * math.Sqrt(n*q*(1-q))
	lo, hi := math.Max(0, n*q-spread), math.Min(n, n*q+spread)
	return p.quantile(q), Interval{Number(p.quantile(lo / n)), Number(p.quantile(hi / n))}
}
