package export

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// RebuiltNote is the Rebuilt field of a Fortio JSON that export made up
// from the store because the run's own file could not be read.
const RebuiltNote = "rebuilt by meshperf export from the stored figures: the histogram's buckets are " +
	"drawn between the stored percentiles, not the load generator's own buckets"

// RebuiltFromHistogramNote marks a Fortio JSON rebuilt from a run stored
// with its histogram (schema 5): the buckets are the load generator's own.
const RebuiltFromHistogramNote = "rebuilt by meshperf from the stored figures and the load generator's own histogram buckets"

// rebuiltResult is a Fortio result made from a stored run: the fields of
// Fortio's JSON that its report UI reads (meshperf's load generator shares
// the shape, loadgen.RunResult), the answer codes and response size, and
// two fields Fortio's readers ignore: meshperf's Provenance and a Rebuilt
// note.
type rebuiltResult struct {
	loadgen.RunResult
	RetCodes   map[string]int64 `json:",omitempty"`
	Sizes      *histogram.Data  `json:",omitempty"`
	Provenance results.Provenance
	Rebuilt    string
}

// FortioJSON is the run's Fortio JSON: the file the load generator wrote,
// when it is still there and still reads as a result, else one rebuilt
// from the stored figures (rebuilt true, marked by its Rebuilt field).
func FortioJSON(r results.Run) (data []byte, rebuilt bool, err error) {
	if r.FortioJSON != "" {
		if b, err := os.ReadFile(r.FortioJSON); err == nil {
			if _, err := results.FromFortioJSON(b); err == nil {
				return b, false, nil
			}
		}
	}
	data, err = RebuiltFortioJSON(r)
	return data, true, err
}

// RebuiltFortioJSON is the run's Fortio JSON made from the store alone
// (its histogram, percentiles, counts, labels and provenance), never from
// a file: what a server answers for a run of a shared store.
func RebuiltFortioJSON(r results.Run) ([]byte, error) {
	data, err := json.MarshalIndent(rebuild(r), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rebuild the Fortio JSON of run %s: %w", ResultID(r), err)
	}
	return append(data, '\n'), nil
}

func rebuild(r results.Run) rebuiltResult {
	qps := "max"
	if r.RequestedQPS > 0 {
		qps = strconv.Itoa(r.RequestedQPS)
	}
	res := rebuiltResult{
		RunResult: loadgen.RunResult{
			RunType:                      fortioRunType(r.Protocol),
			Labels:                       r.Label,
			StartTime:                    r.StartTime,
			RequestedQPS:                 qps,
			RequestedDuration:            r.Duration.Round(1e9).String(),
			ActualQPS:                    results.OrZero(r.ActualQPS),
			ActualDuration:               r.Duration,
			NumThreads:                   r.Connections,
			Version:                      r.Provenance.Meshperf.Version,
			DurationHistogram:            latencyHistogram(r),
			ErrorsDurationHistogram:      histogram.Data{Count: r.Errors},
			CoordinatedOmissionCorrected: r.Corrected,
			ID:                           ResultID(r),
		},
		RetCodes:   r.Codes,
		Provenance: r.Provenance,
		Rebuilt:    RebuiltNote,
	}
	if len(r.Histogram) > 0 {
		res.Rebuilt = RebuiltFromHistogramNote
	}
	if r.ResponseSize > 0 {
		res.Sizes = &histogram.Data{Count: r.Calls, Avg: r.ResponseSize, Min: r.ResponseSize, Max: r.ResponseSize,
			Sum: r.ResponseSize * float64(r.Calls)}
	}
	return res
}

// fortioRunType is Fortio's RunType for a protocol.
func fortioRunType(protocol string) string {
	switch protocol {
	case "grpc":
		return "GRPC"
	case "tcp":
		return "TCP"
	}
	return "HTTP"
}

// latencyHistogram rebuilds DurationHistogram, in seconds, from what the
// store keeps: min, average, max and the latency at each stored percentile.
// Each bucket spans two neighbouring percentiles and holds the calls
// between them, so that Fortio's UI, which draws the buckets and reads the
// percentiles, shows the same distribution.
func latencyHistogram(r results.Run) histogram.Data {
	const s = 1e-3 // ms to seconds
	l := r.Latency
	h := histogram.Data{Count: r.Calls}
	if r.Calls == 0 || math.IsNaN(l.Min) {
		return h
	}
	h.Min, h.Max, h.Avg = l.Min*s, l.Max*s, results.OrZero(l.Avg)*s
	h.Sum = h.Avg * float64(r.Calls)
	if len(r.Histogram) > 0 {
		return storedHistogram(r, h)
	}
	points := r.Spectrum
	if len(points) == 0 {
		for _, p := range []results.PercentileValue{{Percentile: 50, Ms: l.P50}, {Percentile: 75, Ms: l.P75},
			{Percentile: 90, Ms: l.P90}, {Percentile: 99, Ms: l.P99}, {Percentile: 99.9, Ms: l.P999},
			{Percentile: 99.99, Ms: l.P9999}} {
			if !math.IsNaN(p.Ms) {
				points = append(points, p)
			}
		}
	}
	points = append(points, results.PercentileValue{Percentile: 100, Ms: l.Max})
	start, prevPct, counted := l.Min, 0.0, int64(0)
	for _, p := range points {
		if p.Ms < start || p.Percentile <= prevPct {
			continue
		}
		if p.Percentile < 100 {
			h.Percentiles = append(h.Percentiles, histogram.PercentileValue{Percentile: p.Percentile, Value: p.Ms * s})
		}
		n := int64(math.Round(float64(r.Calls)*p.Percentile/100)) - counted
		h.Data = append(h.Data, histogram.Bucket{Start: start * s, End: p.Ms * s, Percent: p.Percentile, Count: n})
		start, prevPct, counted = p.Ms, p.Percentile, counted+n
	}
	return h
}

// storedHistogram fills h with the run's stored buckets, each with the
// cumulative percent Fortio writes, and its stored percentiles.
func storedHistogram(r results.Run, h histogram.Data) histogram.Data {
	const s = 1e-3
	total := int64(0)
	for _, b := range r.Histogram {
		total += b.Count
	}
	seen := int64(0)
	for _, b := range r.Histogram {
		seen += b.Count
		h.Data = append(h.Data, histogram.Bucket{Start: b.StartMs * s, End: b.EndMs * s, Count: b.Count,
			Percent: 100 * float64(seen) / float64(max(total, 1))})
	}
	l := r.Latency
	points := append([]results.PercentileValue{}, r.Spectrum...)
	for _, p := range []results.PercentileValue{{Percentile: 50, Ms: l.P50}, {Percentile: 75, Ms: l.P75},
		{Percentile: 90, Ms: l.P90}, {Percentile: 99, Ms: l.P99}, {Percentile: 99.9, Ms: l.P999}, {Percentile: 99.99, Ms: l.P9999}} {
		if !math.IsNaN(p.Ms) && !slices.ContainsFunc(points, func(q results.PercentileValue) bool { return q.Percentile == p.Percentile }) {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b results.PercentileValue) int { return cmp.Compare(a.Percentile, b.Percentile) })
	for _, p := range points {
		h.Percentiles = append(h.Percentiles, histogram.PercentileValue{Percentile: p.Percentile, Value: p.Ms * s})
	}
	return h
}
