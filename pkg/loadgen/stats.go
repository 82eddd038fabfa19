package loadgen

import (
	"maps"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// Stats is what a run measured.
type Stats struct {
	Start    time.Time     // wall-clock time the timed part began
	Duration time.Duration // from the start to the last response
	Calls    int64         // requests completed, errors included
	Errors   int64         // requests whose outcome was not OK
	Skipped  int64         // requests skipped for being late (NoCatchUp)
	Aborted  bool          // the run stopped on AbortOn

	// Latency is the corrected latency of every request (see requestTimes).
	Latency *histogram.Histogram
	// ServiceTime is the time from the actual send, uncorrected.
	ServiceTime *histogram.Histogram
	// ErrorLatency is Latency for the failed requests only.
	ErrorLatency *histogram.Histogram
	// SendDelay is how late the generator sent requests it could have sent on time.
	SendDelay *histogram.Histogram
	// Codes counts outcomes by code.
	Codes map[int]int64
}

// ActualQPS is the achieved rate.
func (s *Stats) ActualQPS() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Duration.Seconds()
}

// Status is a runner's progress so far, for live display.
type Status struct {
	Started bool          // false during warm-up
	Elapsed time.Duration // since the timed part began
	Calls   int64
	Errors  int64
	P50     time.Duration // corrected latency percentiles so far
	P90     time.Duration
	P99     time.Duration
}

// Status reports progress; safe to call while Run is going.
func (r *Runner) Status() Status {
	if !r.started.Load() {
		return Status{}
	}
	p := r.rec.latencyPercentiles(50, 90, 99)
	return Status{
		Started: true,
		Elapsed: r.clock.Now() - time.Duration(r.startAt.Load()),
		Calls:   r.calls.Load(),
		Errors:  r.errs.Load(),
		P50:     p[0],
		P90:     p[1],
		P99:     p[2],
	}
}

func (r *Runner) stats(start time.Time, d time.Duration) *Stats {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	r.codesMu.Lock()
	defer r.codesMu.Unlock()
	return &Stats{
		Start:        start,
		Duration:     d,
		Calls:        r.calls.Load(),
		Errors:       r.errs.Load(),
		Skipped:      r.dispatch.skipped.Load(),
		Aborted:      r.aborted.Load(),
		Latency:      r.rec.latency.Clone(),
		ServiceTime:  r.rec.serviceTime.Clone(),
		ErrorLatency: r.rec.errors.Clone(),
		SendDelay:    r.rec.sendDelay.Clone(),
		Codes:        maps.Clone(r.codes),
	}
}
