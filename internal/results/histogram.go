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
	return histogramFrom(f.DurationHistogram), nil
}

// histogramFrom is a result's latency histogram in milliseconds; nil when
// it had no calls.
func histogramFrom(h fortioHistogram) []HistogramBucket {
	if len(h.Data) == 0 {
		return nil
	}
	const ms = 1e3
	out := make([]HistogramBucket, 0, len(h.Data))
	for _, b := range h.Data {
		out = append(out, HistogramBucket{StartMs: b.Start * ms, EndMs: b.End * ms, Count: int64(b.Count)})
	}
	return out
}

// RunHistogram is a run's latency histogram: the one stored with it, or,
// for a run stored before histograms were (schema 5), its result file's
// where that file is still readable; nil when neither is.
func RunHistogram(r Run) []HistogramBucket {
	if len(r.Histogram) > 0 {
		return r.Histogram
	}
	if r.FortioJSON == "" {
		return nil
	}
	h, err := ReadLatencyHistogram(r.FortioJSON)
	if err != nil {
		return nil
	}
	return h
}

// migrationHistograms (schema 4 -> 5) stores each run's latency histogram,
// so that a shared store draws it where the result file is not at hand.
// Buckets are numbered in their order: their bounds need not be unique
// (Nighthawk's fortio output repeats a bound where it has empty buckets).
// SQLite's spelling, as every migration's (dialect.go).
const migrationHistograms = `CREATE TABLE run_histogram (
	run_row  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	bucket   INTEGER NOT NULL,
	start_ms REAL    NOT NULL,
	end_ms   REAL    NOT NULL,
	count    INTEGER NOT NULL,
	PRIMARY KEY (run_row, bucket)
);`
