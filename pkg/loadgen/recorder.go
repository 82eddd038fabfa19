package loadgen

import (
	"sync"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// requestTimes are the clock readings of one request.
type requestTimes struct {
	due  time.Duration // when the timetable wanted it sent
	free time.Duration // when its connection became free to send it
	sent time.Duration // when it was sent
	done time.Duration // when its response was complete
}

// serviceTime is the time from the actual send to the response: what Fortio
// reports, and what hides a stall.
func (t requestTimes) serviceTime() time.Duration { return t.done - t.sent }

// queueWait is how long the request waited because every connection was busy:
// the part of its latency that coordinated omission would hide.
func (t requestTimes) queueWait() time.Duration { return max(0, t.free-t.due) }

// latency is the corrected latency: service time plus the wait for a connection.
//
// It is not simply done - due. When a connection is free early and sleeps until
// the request is due, the kernel wakes it some tens of microseconds late (this is
// the generator's own timer precision, not anything the server did); counting
// that would add the generator's jitter to every sub-millisecond latency. When the
// request had to wait for a connection, the wait is counted in full.
func (t requestTimes) latency() time.Duration { return t.serviceTime() + t.queueWait() }

// sendDelay is how late the generator itself sent the request after it could
// have: timer overshoot and scheduling. Reported, so a user sees whether the
// generator kept to its timetable.
func (t requestTimes) sendDelay() time.Duration { return max(0, t.sent-max(t.due, t.free)) }

// recorder holds the run's histograms behind one lock, taken once per request.
type recorder struct {
	mu          sync.Mutex
	latency     *histogram.Histogram
	serviceTime *histogram.Histogram
	errors      *histogram.Histogram
	sendDelay   *histogram.Histogram
}

func newRecorder() recorder {
	return recorder{
		latency:     histogram.New(histogram.Latency),
		serviceTime: histogram.New(histogram.Latency),
		errors:      histogram.New(histogram.Latency),
		sendDelay:   histogram.New(histogram.Latency),
	}
}

func (r *recorder) record(t requestTimes, ok bool) {
	lat := int64(t.latency())
	r.mu.Lock()
	r.latency.Record(lat)
	r.serviceTime.Record(int64(t.serviceTime()))
	r.sendDelay.Record(int64(t.sendDelay()))
	if !ok {
		r.errors.Record(lat)
	}
	r.mu.Unlock()
}

// latencyPercentiles reads percentiles of the corrected latency so far.
func (r *recorder) latencyPercentiles(ps ...float64) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		out[i] = time.Duration(r.latency.Percentile(p))
	}
	return out
}
