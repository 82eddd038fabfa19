package loadgen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

func statsFor(calls int64, d time.Duration) *Stats {
	s := &Stats{
		Start: time.Date(2026, 11, 21, 13, 21, 11, 0, time.UTC), Duration: d, Calls: calls,
		Latency: histogram.New(histogram.Latency), ServiceTime: histogram.New(histogram.Latency),
		ErrorLatency: histogram.New(histogram.Latency), SendDelay: histogram.New(histogram.Latency),
	}
	for i := int64(0); i < calls; i++ {
		s.Latency.Record(200_000)
		s.ServiceTime.Record(150_000)
	}
	return s
}

func TestNewRunResultSaysWhatWasAskedAsFortioDoes(t *testing.T) {
	d := Describe{RunType: "HTTP", Labels: "127.0.0.1:8080/echo , vm", Percentiles: []float64{50, 99}}
	for _, tc := range []struct {
		o                 Options
		qps, duration     string
		corrected         bool
		wantActualQPSPerS float64
	}{
		{Options{QPS: 1000, Connections: 4, Duration: 10 * time.Second}, "1000", "10s", true, 1000},
		{Options{QPS: 12.5, Connections: 4, Exactly: 100}, "12.5", "exactly 100 calls", true, 1000},
		{Options{Connections: 4, Duration: 2 * time.Second}, "max", "2s", false, 1000},
		{Options{Connections: 4}, "max", "until stopped", false, 1000},
	} {
		r := NewRunResult(d, tc.o, statsFor(1000, time.Second))
		if r.RequestedQPS != tc.qps || r.RequestedDuration != tc.duration || r.CoordinatedOmissionCorrected != tc.corrected {
			t.Errorf("%+v: RequestedQPS %q RequestedDuration %q corrected %v", tc.o, r.RequestedQPS, r.RequestedDuration, r.CoordinatedOmissionCorrected)
		}
		if r.ActualQPS != tc.wantActualQPSPerS || r.NumThreads != 4 {
			t.Errorf("%+v: ActualQPS %v NumThreads %d", tc.o, r.ActualQPS, r.NumThreads)
		}
	}
	r := NewRunResult(d, Options{QPS: 10, Connections: 1}, statsFor(10, time.Second))
	if r.ID != "2026-11-21-132111_127_0_0_1_8080_echo_vm" {
		t.Errorf("ID = %q, want Fortio's form", r.ID)
	}
	if r.ErrorsDurationHistogram.Count != 0 || r.ErrorsDurationHistogram.Percentiles != nil {
		t.Errorf("no errors should give an empty error histogram, got %+v", r.ErrorsDurationHistogram)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["ActualDuration"].(float64) != 1e9 || back["StartTime"] != "2026-11-21T13:21:11Z" {
		t.Errorf("ActualDuration %v (want ns), StartTime %v (want RFC 3339)", back["ActualDuration"], back["StartTime"])
	}
}
