package compare

import (
	"math"
	"sort"

	"github.com/meshperf/meshperf/internal/results"
)

// SideLatency is a side's latency distribution at a cell, its repetitions
// pooled: what the HTML page overlays.
type SideLatency struct {
	Source string `json:"source"` // SourceHistogram, SourceSpectrum or SourceMixed
	Calls  int64  `json:"calls"`
	// Buckets are the repetitions' histogram buckets summed (buckets that
	// end at the same latency are one); none when no repetition's load
	// result file could be read.
	Buckets []results.HistogramBucket `json:"buckets"`
	// Cumulative is the percent of calls at or below each latency.
	Cumulative []results.PercentileValue `json:"cumulative"`
	// Spectrum is the pooled latency at results.SpectrumPercentiles.
	Spectrum []results.PercentileValue `json:"spectrum"`
}

// sideDistribution is a side's pooled distribution at a cell.
type sideDistribution struct {
	pooled  pooled
	source  string
	buckets []results.HistogramBucket
}

// readSideLatency pools the runs' distributions: each run's histogram (the
// stored one, or its load result file's for a run stored before histograms
// were) when there is one, else its stored spectrum.
func readSideLatency(runs []results.Run) sideDistribution {
	var d sideDistribution
	var cdfs []cdf
	fromHistogram, fromSpectrum := 0, 0
	byEnd := map[float64]*results.HistogramBucket{}
	for _, r := range runs {
		if bs := results.RunHistogram(r); bs != nil {
			if c, ok := cdfFromHistogram(bs); ok {
				cdfs = append(cdfs, c)
				fromHistogram++
				for _, b := range bs {
					if m := byEnd[b.EndMs]; m != nil {
						m.StartMs, m.Count = math.Min(m.StartMs, b.StartMs), m.Count+b.Count
					} else {
						b := b
						byEnd[b.EndMs] = &b
					}
				}
				continue
			}
		}
		if c, ok := cdfFromSpectrum(r); ok {
			cdfs = append(cdfs, c)
			fromSpectrum++
		}
	}
	if len(cdfs) == 0 {
		return d
	}
	d.pooled = newPooled(cdfs)
	switch {
	case fromSpectrum == 0:
		d.source = SourceHistogram
	case fromHistogram == 0:
		d.source = SourceSpectrum
	default:
		d.source = SourceMixed
	}
	for _, b := range byEnd {
		d.buckets = append(d.buckets, *b)
	}
	sort.Slice(d.buckets, func(i, j int) bool { return d.buckets[i].EndMs < d.buckets[j].EndMs })
	return d
}

func (d sideDistribution) ok() bool { return d.pooled.calls > 0 }

// estimate is the pooled percentile pct (0-100) with its order-statistic
// interval.
func (d sideDistribution) estimate(pct, confidence float64) PercentileEstimate {
	v, ci := d.pooled.percentileInterval(pct, confidence)
	return PercentileEstimate{Value: Number(v), CI: ci, Calls: d.pooled.calls, Source: d.source}
}

// cumulativePoints is how many points the cumulative curve of a side
// without histograms is drawn with.
const cumulativePoints = 100

// chart is the side's distribution for the page; nil without one.
func (d sideDistribution) chart() *SideLatency {
	if !d.ok() {
		return nil
	}
	s := &SideLatency{Source: d.source, Calls: d.pooled.calls, Buckets: d.buckets}
	var xs []float64
	if len(d.buckets) > 0 {
		xs = append(xs, d.buckets[0].StartMs)
		for _, b := range d.buckets {
			xs = append(xs, b.EndMs)
		}
	} else {
		for i := range cumulativePoints + 1 {
			xs = append(xs, d.pooled.lo+(d.pooled.hi-d.pooled.lo)*float64(i)/cumulativePoints)
		}
	}
	for _, x := range xs {
		s.Cumulative = append(s.Cumulative, results.PercentileValue{Percentile: 100 * d.pooled.at(x), Ms: x})
	}
	for _, p := range results.SpectrumPercentiles {
		s.Spectrum = append(s.Spectrum, results.PercentileValue{Percentile: p, Ms: d.pooled.quantile(p / 100)})
	}
	return s
}

// Drawn is the side's latency as results draws it on overlaid charts; nil
// for a side without one.
func (l *SideLatency) Drawn() *results.ComparedLatency {
	if l == nil {
		return nil
	}
	return &results.ComparedLatency{Buckets: l.Buckets, Cumulative: l.Cumulative, Spectrum: l.Spectrum}
}
