package results

import (
	"math"
	"strconv"
	"strings"
)

// SpectrumPercentiles are the percentiles a run's latency spectrum is kept
// at: from the median to P99.99, closer together towards the tail, so that
// on a percentile axis (HdrHistogram's plot: x = 1/(1-p), log scale) the
// points are spread evenly and a long tail shows as the curve turning up.
var SpectrumPercentiles = []float64{
	50, 60, 70, 75, 80, 85, 90, 92.5, 95, 96.25, 97.5, 98.5,
	99, 99.25, 99.5, 99.75, 99.9, 99.925, 99.95, 99.975, 99.99,
}

// SpectrumFlag is SpectrumPercentiles as the load generator's -p value, so
// that a run's JSON holds each of them exactly rather than interpolated
// from the histogram's buckets.
func SpectrumFlag() string {
	s := make([]string, len(SpectrumPercentiles))
	for i, p := range SpectrumPercentiles {
		s[i] = strconv.FormatFloat(p, 'f', -1, 64)
	}
	return strings.Join(s, ",")
}

// PercentileValue is one point of a latency spectrum.
type PercentileValue struct {
	Percentile float64 // 0-100
	Ms         float64
}

// spectrumFrom reads the spectrum off a result's histogram: nil when it
// holds no calls.
func spectrumFrom(h fortioHistogram) []PercentileValue {
	if h.Count == 0 {
		return nil
	}
	out := make([]PercentileValue, 0, len(SpectrumPercentiles))
	for _, p := range SpectrumPercentiles {
		if v := percentile(h, p); !math.IsNaN(v) {
			out = append(out, PercentileValue{Percentile: p, Ms: v * 1e3})
		}
	}
	return out
}

// medianSpectrum is, at each percentile, the median over the runs that have
// a value there: the spectrum of a mode at a point, as the summary's other
// figures are medians over repetitions.
func medianSpectrum(rs []Run) []PercentileValue {
	byPct := map[float64][]float64{}
	for _, r := range rs {
		for _, pv := range r.Spectrum {
			byPct[pv.Percentile] = append(byPct[pv.Percentile], pv.Ms)
		}
	}
	var out []PercentileValue
	for _, p := range SpectrumPercentiles {
		if vs := byPct[p]; len(vs) > 0 {
			out = append(out, PercentileValue{Percentile: p, Ms: Median(vs)})
		}
	}
	return out
}

// percentileAxisX maps a percentile to HdrHistogram's percentile axis,
// 1/(1-p): 50% is 2, 90% 10, 99% 100, 99.9% 1000.
func percentileAxisX(p float64) float64 {
	return 1 / (1 - p/100)
}
