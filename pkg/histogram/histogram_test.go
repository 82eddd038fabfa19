package histogram

import (
	"math"
	"testing"
	"time"
)

// Percentiles below 1 ms must come out right with no resolution flag: Fortio's
// default buckets put everything under 1 ms into one bucket and interpolate.
func TestPercentilesBelowAMillisecondAreExact(t *testing.T) {
	h := New(Latency)
	for i := 1; i <= 1000; i++ { // 1 µs .. 1000 µs, uniformly
		h.Record(int64(i) * int64(time.Microsecond))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 500 * time.Microsecond},
		{90, 900 * time.Microsecond},
		{99, 990 * time.Microsecond},
		{99.9, 999 * time.Microsecond},
	} {
		got := time.Duration(h.Percentile(tc.p))
		if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 0.001 {
			t.Errorf("p%v = %v, want %v within 0.1%%", tc.p, got, tc.want)
		}
	}
}

func TestRangeCoversAnHourAtThreeDigits(t *testing.T) {
	h := New(Latency)
	hour := int64(time.Hour)
	h.Record(hour)
	if got := h.Percentile(100); math.Abs(float64(got-hour))/float64(hour) > 0.001 {
		t.Errorf("1h recorded reads back as %v", time.Duration(got))
	}
	h.Record(10 * hour) // past the range: clamped, not lost
	if h.Count() != 2 || h.Max() != Latency.Highest {
		t.Errorf("count %d max %v after recording past the range", h.Count(), time.Duration(h.Max()))
	}
}

func TestExactMinMaxSumMean(t *testing.T) {
	h := New(Latency)
	for _, v := range []int64{123_456, 7_654_321, 1_000_001} {
		h.Record(v)
	}
	if h.Min() != 123_456 || h.Max() != 7_654_321 || h.Sum() != 8_777_778 {
		t.Errorf("min %d max %d sum %v", h.Min(), h.Max(), h.Sum())
	}
	if math.Abs(h.Mean()-8_777_778.0/3) > 1e-6 {
		t.Errorf("mean %v", h.Mean())
	}
	h.Record(-5)
	if h.Min() != 0 {
		t.Errorf("a negative value should count as 0, min = %d", h.Min())
	}
}

func TestMergeAndClone(t *testing.T) {
	a, b := New(Latency), New(Latency)
	a.Record(2000)
	b.Record(1000)
	b.Record(9000)
	c := a.Clone()
	a.Merge(b)
	if a.Count() != 3 || a.Min() != 1000 || a.Max() != 9000 || a.Sum() != 12000 {
		t.Errorf("merged: count %d min %d max %d sum %v", a.Count(), a.Min(), a.Max(), a.Sum())
	}
	if c.Count() != 1 {
		t.Errorf("the clone changed with the original: count %d", c.Count())
	}
	e := New(Latency)
	e.Merge(New(Latency))
	if e.Count() != 0 || e.Min() != 0 {
		t.Error("merging empty histograms should stay empty")
	}
}

func TestExportIsFortioShaped(t *testing.T) {
	h := New(Latency)
	for i := 0; i < 900; i++ {
		h.Record(int64(100 * time.Microsecond))
	}
	for i := 0; i < 100; i++ {
		h.Record(int64(5 * time.Millisecond))
	}
	d := h.Export(1e-9, []float64{50, 99})
	if d.Count != 1000 || d.Min != 100e-6 || d.Max != 5e-3 {
		t.Fatalf("count %d min %v max %v", d.Count, d.Min, d.Max)
	}
	if len(d.Data) != 2 {
		t.Fatalf("buckets = %+v, want two (one per value)", d.Data)
	}
	if d.Data[0].Count != 900 || d.Data[0].Percent != 90 || d.Data[1].Percent != 100 {
		t.Errorf("buckets = %+v", d.Data)
	}
	if d.Data[0].Start != d.Min || d.Data[1].End != d.Max {
		t.Errorf("buckets should start at min and end at max: %+v", d.Data)
	}
	var sum int64
	for i, b := range d.Data {
		sum += b.Count
		if b.End < b.Start || (i > 0 && b.Start < d.Data[i-1].End) {
			t.Errorf("bucket %d out of order: %+v", i, b)
		}
	}
	if sum != d.Count {
		t.Errorf("bucket counts sum to %d, want %d", sum, d.Count)
	}
	if len(d.Percentiles) != 2 || d.Percentiles[0].Percentile != 50 ||
		math.Abs(d.Percentiles[0].Value-100e-6) > 1e-7 || math.Abs(d.Percentiles[1].Value-5e-3) > 5e-6 {
		t.Errorf("percentiles = %+v", d.Percentiles)
	}
}

func TestExportOfEmptyHistogramHasNoBuckets(t *testing.T) {
	d := New(Latency).Export(1e-9, []float64{50})
	if d.Count != 0 || d.Data != nil || d.Percentiles != nil {
		t.Errorf("empty export = %+v; Fortio writes Data: null and no percentiles", d)
	}
}

func TestExportJoinsNeighbouringBars(t *testing.T) {
	h := New(Latency)
	for v := int64(1000); v < 10_000_000; v = v * 101 / 100 { // 1 µs .. 10 ms, 1% apart
		h.Record(v)
	}
	d := h.Export(1e-9, nil)
	// Four decades at 5% per bucket: about 47 per decade.
	if len(d.Data) < 100 || len(d.Data) > 200 {
		t.Errorf("%d buckets for four decades", len(d.Data))
	}
	for _, b := range d.Data[1:] {
		if b.End > b.Start*(1+bucketWidth)*1.002 {
			t.Errorf("bucket %+v wider than %v%%", b, bucketWidth*100)
		}
	}
}

func TestConcurrentPercentilesAndSnapshot(t *testing.T) {
	c := NewConcurrent(Latency)
	done := make(chan struct{})
	go func() {
		for i := 1; i <= 1000; i++ {
			c.Record(int64(i) * 1000)
		}
		close(done)
	}()
	<-done
	p := c.Percentiles(50, 100)
	if p[0] < 499_000 || p[0] > 501_000 || p[1] != 1_000_000 {
		t.Errorf("percentiles %v", p)
	}
	if s := c.Snapshot(); s.Count() != 1000 {
		t.Errorf("snapshot count %d", s.Count())
	}
}

func BenchmarkRecord(b *testing.B) {
	h := New(Latency)
	v := int64(123_456)
	for b.Loop() {
		h.Record(v)
		v = v*7%10_000_000 + 1000
	}
}
