package histogram

// Bucket is one bar of Fortio's histogram: values in [Start, End], Count of them,
// and Percent, the cumulative percentage of all values up to End.
type Bucket struct {
	Start   float64
	End     float64
	Percent float64
	Count   int64
}

// PercentileValue is one requested percentile, as Fortio writes it.
type PercentileValue struct {
	Percentile float64
	Value      float64
}

// Data is a histogram in Fortio's JSON shape (its HistogramData), so that Fortio's
// report UI and Istio's tooling read it unchanged. Values are scaled (seconds for
// latencies, bytes for sizes).
type Data struct {
	Count       int64
	Min         float64
	Max         float64
	Sum         float64
	Avg         float64
	StdDev      float64
	Data        []Bucket
	Percentiles []PercentileValue `json:",omitempty"`
}

// bucketWidth is how wide (relative to its start) an exported bucket may grow.
// The HdrHistogram holds thousands of 0.1%-wide bars; Fortio's UI draws each bucket
// as a bar, so neighbouring bars are joined until a bucket spans 5%. That keeps a
// plot readable (at most ~47 buckets per decade) while percentiles, which are read
// from the HdrHistogram and not from these buckets, keep full precision.
const bucketWidth = 0.05

// Export returns h in Fortio's shape. Each value is multiplied by scale (1e-9 turns
// nanoseconds into seconds); percentiles are given as 0..100.
func (h *Histogram) Export(scale float64, percentiles []float64) Data {
	d := Data{
		Count:  h.Count(),
		Min:    float64(h.min) * scale,
		Max:    float64(h.max) * scale,
		Sum:    h.sum * scale,
		Avg:    h.Mean() * scale,
		StdDev: h.stdDev() * scale,
	}
	if d.Count == 0 {
		return d
	}
	d.Data = h.buckets(scale)
	for _, p := range percentiles {
		d.Percentiles = append(d.Percentiles, PercentileValue{
			Percentile: p,
			Value:      float64(h.Percentile(p)) * scale,
		})
	}
	return d
}

// buckets joins the HdrHistogram's non-empty bars into Fortio buckets.
func (h *Histogram) buckets(scale float64) []Bucket {
	var (
		out        []Bucket
		cumulative int64
		cur        *Bucket
		curStart   int64
	)
	total := float64(h.Count())
	for _, bar := range h.h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		limit := float64(max(curStart, h.r.Lowest)) * (1 + bucketWidth)
		if cur == nil || float64(bar.To) > limit {
			out = append(out, Bucket{Start: float64(bar.From) * scale})
			cur = &out[len(out)-1]
			curStart = bar.From
		}
		cumulative += bar.Count
		cur.End = float64(bar.To) * scale
		cur.Count += bar.Count
		cur.Percent = 100 * float64(cumulative) / total
	}
	// The bars' edges are rounded to the histogram's precision; the exact extremes
	// are known, so the first and last buckets end on them, as Fortio's do.
	out[0].Start = float64(h.min) * scale
	out[len(out)-1].End = float64(h.max) * scale
	return out
}
