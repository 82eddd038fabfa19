package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// wrk writes no JSON: its figures are read from what it prints with
// --latency, which has been stable across its releases:
//
//	  Thread Stats   Avg      Stdev     Max   +/- Stdev
//	    Latency     1.44ms    4.20ms  45.17ms   94.45%
//	  Latency Distribution
//	     50%  228.00us
//	     ...
//	  24080 requests in 2.12s, 26.23MB read
//	  Socket errors: connect 0, read 0, write 0, timeout 3
//	  Non-2xx or 3xx responses: 12
//	Requests/sec:  11367.65
var (
	wrkLatencyRE    = regexp.MustCompile(`(?m)^\s+Latency\s+([\d.]+)(us|ms|s|m)\s+[\d.]+\w+\s+([\d.]+)(us|ms|s|m)`)
	wrkPercentileRE = regexp.MustCompile(`(?m)^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$`)
	wrkRequestsRE   = regexp.MustCompile(`(?m)^\s+(\d+) requests in ([\d.]+)(us|ms|s|m),`)
	wrkRateRE       = regexp.MustCompile(`(?m)^Requests/sec:\s+([\d.]+)`)
	wrkSocketRE     = regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xxRE     = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: (\d+)`)
)

// readWrk reads wrk's output from its log file as a run.
func readWrk(path string) (results.Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return results.Run{}, err
	}
	return parseWrk(string(data))
}

// parseWrk reads wrk's --latency output: the rate, the calls, the
// average, maximum and percentile latencies (as measured, not corrected
// for coordinated omission: wrk sends a request when the last one is
// answered), and the errors, which wrk counts as sockets that failed and
// answers that were not 2xx or 3xx. What it does not print is NaN.
func parseWrk(out string) (results.Run, error) {
	nan := math.NaN()
	r := results.Run{Latency: results.Latency{Min: nan, Max: nan, Avg: nan, P50: nan, P75: nan, P90: nan, P99: nan,
		P999: nan, P9999: nan}, SendDelayP99: nan}
	m := wrkRequestsRE.FindStringSubmatch(out)
	rate := wrkRateRE.FindStringSubmatch(out)
	if m == nil || rate == nil {
		return r, errors.New("wrk's output has no \"N requests in\" or \"Requests/sec\" line")
	}
	r.Calls, _ = strconv.ParseInt(m[1], 10, 64)
	r.Duration = time.Duration(wrkMillis(m[2], m[3]) * float64(time.Millisecond))
	r.ActualQPS, _ = strconv.ParseFloat(rate[1], 64)
	if m := wrkLatencyRE.FindStringSubmatch(out); m != nil {
		r.Latency.Avg, r.Latency.Max = wrkMillis(m[1], m[2]), wrkMillis(m[3], m[4])
	}
	percentiles := map[string]*float64{"50": &r.Latency.P50, "75": &r.Latency.P75, "90": &r.Latency.P90, "99": &r.Latency.P99}
	for _, m := range wrkPercentileRE.FindAllStringSubmatch(out, -1) {
		*percentiles[m[1]] = wrkMillis(m[2], m[3])
	}
	for _, m := range wrkSocketRE.FindAllStringSubmatch(out, -1) {
		for _, n := range m[1:] {
			v, _ := strconv.ParseInt(n, 10, 64)
			r.Errors += v
		}
	}
	if m := wrkNon2xxRE.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		r.Errors += v
	}
	if r.Calls > 0 {
		r.ErrorPercent = 100 * float64(r.Errors) / float64(r.Calls)
	}
	if math.IsNaN(r.Latency.P50) {
		return r, fmt.Errorf("wrk's output has no latency distribution (was --latency given?)")
	}
	return r, nil
}

// wrkMillis is one of wrk's durations ("228.00us", "3.25ms", "1.02s",
// "1.50m") in milliseconds.
func wrkMillis(value, unit string) float64 {
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return math.NaN()
	}
	switch unit {
	case "us":
		return v / 1e3
	case "ms":
		return v
	case "s":
		return v * 1e3
	}
	return v * 60e3 // "m"
}
