package loadgen

import (
	"testing"
	"time"
)

// BenchmarkRecordRequest is the engine's cost of recording one finished request:
// the latency arithmetic, four histograms and the lock.
func BenchmarkRecordRequest(b *testing.B) {
	r := newRecorder()
	t := requestTimes{due: time.Millisecond, free: time.Millisecond / 2, sent: time.Millisecond + 50*time.Microsecond}
	for b.Loop() {
		t.done = t.sent + time.Duration(100_000+(t.due%50_000))
		r.record(t, true)
		t.due += 997
	}
}

// BenchmarkTimetableSlot is the cost of computing a request's due time.
func BenchmarkTimetableSlot(b *testing.B) {
	tt := Timetable{Rate: 5000, Connections: 4, Jitter: true, Seed: 1}
	var i int64
	for b.Loop() {
		_ = tt.Slot(i)
		i++
	}
}
