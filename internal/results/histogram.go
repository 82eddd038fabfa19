package results

import (
	"fmt"
	"os"
)

// HistogramBucket is one bucket of a run's latency histogram: the calls
// that took from StartMs to EndMs.
type HistogramBucket struct {
	StartMs, EndMs float64
	Count          int64
}

// ReadLatencyHistogram reads the latency histogram of a load result file
// (Fortio's or meshperf load's JSON): every call, bucketed, which the
// stored spectrum summarizes at a few percentiles. Comparisons read it
// for their distribution-free percentile intervals and their overlaid
// distribution charts.
func ReadLatencyHistogram(path string) ([]HistogramBucket, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read latency histogram: %w", err)
	}
	f, err := decodeFortioResult(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	const ms = 1e3
	out := make([]HistogramBucket, 0, len(f.DurationHistogram.Data))
	for _, b := range f.DurationHistogram.Data {
		out = append(out, HistogramBucket{StartMs: b.Start * ms, EndMs: b.End * ms, Count: int64(b.Count)})
	}
	return out, nil
}
