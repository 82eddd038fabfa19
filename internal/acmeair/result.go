package acmeair

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/version"
	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// RunType is the driver's result's RunType.
const RunType = "acmeair"

// percentiles are the ones written into the result, Fortio's defaults.
var percentiles = []float64{50, 75, 90, 99, 99.9}

// Result is the driver's result: a Fortio-compatible JSON result over all
// of its calls (as the load generator writes one), plus each
// transaction's figures.
type Result struct {
	loadgen.RunResult
	// RetCodes counts the calls by HTTP status; -1 is a call without a
	// usable answer.
	RetCodes map[int]int64
	// Transactions are the figures of each transaction the run made, in
	// iteration order.
	Transactions []results.TransactionFigures
}

func (d *driver) result(start time.Time, took time.Duration) *Result {
	all := d.all.Snapshot()
	s := &loadgen.Stats{
		Start:    start,
		Duration: took,
		Calls:    all.Count(),
		Errors:   d.errs.Snapshot().Count(),
		Latency:  all,
		// A closed loop without think time sends each call when the last
		// one answers: no schedule to fall behind, the service time is
		// the latency.
		ServiceTime:  all,
		ErrorLatency: d.errs.Snapshot(),
		SendDelay:    histogram.New(histogram.Latency),
	}
	r := &Result{
		RunResult: loadgen.NewRunResult(loadgen.Describe{RunType: RunType, Labels: RunType,
			Version: version.String(), Percentiles: percentiles},
			loadgen.Options{Connections: d.cfg.Users, Duration: d.cfg.Duration}, s),
		RetCodes: d.codes,
	}
	for _, name := range Transactions {
		t := d.tx[name]
		if t.calls.Load() == 0 {
			continue
		}
		r.Transactions = append(r.Transactions, results.TransactionFigures{
			Name:    name,
			Count:   t.calls.Load(),
			Errors:  t.errors.Load(),
			RPS:     float64(t.calls.Load()) / took.Seconds(),
			Latency: latencyMS(t.latency.Snapshot()),
		})
	}
	return r
}

// latencyMS is a histogram of nanoseconds, not empty, as results' figures
// in ms.
func latencyMS(h *histogram.Histogram) results.Latency {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return results.Latency{
		Min: ms(h.Min()), Max: ms(h.Max()), Avg: h.Mean() / 1e6,
		P50: ms(h.Percentile(50)), P75: ms(h.Percentile(75)), P90: ms(h.Percentile(90)),
		P99: ms(h.Percentile(99)), P999: ms(h.Percentile(99.9)), P9999: ms(h.Percentile(99.99)),
	}
}

// Transaction is the named transaction's figures, if the run made it.
func (r *Result) Transaction(name string) (results.TransactionFigures, bool) {
	for _, t := range r.Transactions {
		if t.Name == name {
			return t, true
		}
	}
	return results.TransactionFigures{}, false
}

// WriteTable writes the per-transaction table the drive command ends with.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transaction\tcount\terrors\tshare %\trps\tp50 ms\tp90 ms\tp99 ms\t")
	total := r.DurationHistogram.Count
	for _, t := range r.Transactions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t\n", t.Name, t.Count, t.Errors,
			100*float64(t.Count)/float64(max(total, 1)), t.RPS, t.Latency.P50, t.Latency.P90, t.Latency.P99)
	}
	all := r.DurationHistogram
	p := func(want float64) float64 {
		for _, v := range all.Percentiles {
			if v.Percentile == want {
				return v.Value * 1e3
			}
		}
		return math.NaN()
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t100.0\t%.1f\t%.2f\t%.2f\t%.2f\t\n", total, r.ErrorsDurationHistogram.Count,
		r.ActualQPS, p(50), p(90), p(99))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d users for %v\n", r.NumThreads, r.ActualDuration.Round(time.Millisecond))
	return err
}

// ReadTransactions reads the per-transaction figures from a driver's JSON
// result; results.FromFortioJSON reads the rest of it.
func ReadTransactions(data []byte) ([]results.TransactionFigures, error) {
	var r struct{ Transactions []results.TransactionFigures }
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read the Acmeair result: %w", err)
	}
	return r.Transactions, nil
}
