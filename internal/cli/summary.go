package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// describeRun is the first line of a run: what is about to happen.
func describeRun(f *loadFlags, target string) string {
	rate := "as fast as possible"
	if f.qps > 0 {
		rate = strconv.FormatFloat(f.qps, 'f', -1, 64) + " qps"
	}
	length := "for " + f.duration.String()
	switch {
	case f.exactly > 0:
		length = fmt.Sprintf("for exactly %d calls", f.exactly)
	case f.duration == 0:
		length = "until interrupted"
	}
	return fmt.Sprintf("meshperf load at %s, %d connections, %s: %s", rate, f.connections, length, target)
}

// printSummary prints the result for a person: what was achieved, the latency
// percentiles (corrected, and uncorrected when that tells a different story), the
// outcomes and the sockets.
func printSummary(w io.Writer, r report, percentiles []float64) {
	c := r.common
	fmt.Fprintf(w, "Ended after %v: %d calls, %.2f qps (requested %s)", c.ActualDuration.Round(time.Microsecond),
		c.DurationHistogram.Count, c.ActualQPS, c.RequestedQPS)
	if c.SkippedCalls > 0 {
		fmt.Fprintf(w, ", %d late calls skipped (-nocatchup)", c.SkippedCalls)
	}
	if c.Aborted {
		fmt.Fprint(w, ", aborted by -abort-on")
	}
	fmt.Fprintln(w)
	latencyName := "Latency"
	if c.CoordinatedOmissionCorrected {
		latencyName = "Latency (from the scheduled time)"
	}
	printLatency(w, latencyName, c.DurationHistogram)
	if c.CoordinatedOmissionCorrected && differs(c.DurationHistogram, c.ServiceTimeHistogram) {
		printLatency(w, "Service time (from the actual send; what an uncorrected tool reports)", c.ServiceTimeHistogram)
	}
	if c.CoordinatedOmissionCorrected && c.SendDelayHistogram.Count > 0 {
		fmt.Fprintf(w, "Pacing: requests left p50 %s, p99 %s after they could have (generator timer precision, not counted above)\n",
			formatSeconds(percentile(c.SendDelayHistogram, 50)), formatSeconds(percentile(c.SendDelayHistogram, 99)))
	}
	if c.ErrorsDurationHistogram.Count > 0 {
		printLatency(w, "Errors", c.ErrorsDurationHistogram)
	}
	printCodes(w, r.codes)
	if r.sockets >= 0 {
		fmt.Fprintf(w, "Sockets used: %d (for %d connections)\n", r.sockets, c.NumThreads)
	}
	for _, d := range r.details {
		fmt.Fprintln(w, d)
	}
}

// differs says whether the uncorrected histogram tells a different story: a
// percentile apart by more than 10%.
func differs(corrected, service histogram.Data) bool {
	for i := range corrected.Percentiles {
		a, b := corrected.Percentiles[i].Value, service.Percentiles[i].Value
		if math.Abs(a-b) > 0.1*math.Max(a, b) {
			return true
		}
	}
	return false
}

func printLatency(w io.Writer, name string, h histogram.Data) {
	fmt.Fprintf(w, "%s: count %d, avg %s ± %s, min %s, max %s\n", name, h.Count,
		formatSeconds(h.Avg), formatSeconds(h.StdDev), formatSeconds(h.Min), formatSeconds(h.Max))
	var parts []string
	for _, p := range h.Percentiles {
		parts = append(parts, fmt.Sprintf("p%s %s", strconv.FormatFloat(p.Percentile, 'f', -1, 64), formatSeconds(p.Value)))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, "  "))
	}
}

func printCodes(w io.Writer, codes map[string]int64) {
	var total int64
	keys := make([]string, 0, len(codes))
	for k, n := range codes {
		keys = append(keys, k)
		total += n
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "Code %s: %d (%.1f %%)\n", k, codes[k], 100*float64(codes[k])/float64(total))
	}
}

func percentile(h histogram.Data, p float64) float64 {
	for _, v := range h.Percentiles {
		if v.Percentile == p {
			return v.Value
		}
	}
	return math.NaN()
}

// formatSeconds shows a latency with three significant digits in the unit that
// reads best: 87.3µs, 1.25ms, 2.04s.
func formatSeconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s == 0:
		return "0"
	case s < 1e-3:
		return strconv.FormatFloat(roundSig(s*1e6), 'f', -1, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(roundSig(s*1e3), 'f', -1, 64) + "ms"
	default:
		return strconv.FormatFloat(roundSig(s), 'f', -1, 64) + "s"
	}
}

func roundSig(v float64) float64 {
	if v == 0 {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

func formatBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return strconv.FormatFloat(roundSig(b/(1<<20)), 'f', -1, 64) + " MiB"
	case b >= 1<<10:
		return strconv.FormatFloat(roundSig(b/(1<<10)), 'f', -1, 64) + " KiB"
	default:
		return strconv.FormatFloat(math.Round(b), 'f', -1, 64) + " B"
	}
}
