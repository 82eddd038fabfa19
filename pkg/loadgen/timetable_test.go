package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestTimetableDefaultStartsConnectionsTogether(t *testing.T) {
	tt := Timetable{Rate: 1000, Connections: 4}
	want := []time.Duration{0, 0, 0, 0, 4 * time.Millisecond, 4 * time.Millisecond}
	for i, w := range want {
		if got := tt.Slot(int64(i)); got != w {
			t.Errorf("Slot(%d) = %v, want %v", i, got, w)
		}
	}
}

func TestTimetableUniformSpreadsRequests(t *testing.T) {
	tt := Timetable{Rate: 1000, Connections: 4, Uniform: true}
	for i := int64(0); i < 10; i++ {
		if got, want := tt.Slot(i), time.Duration(i)*time.Millisecond; got != want {
			t.Errorf("Slot(%d) = %v, want %v", i, got, want)
		}
	}
}

func TestTimetableJitterStaysWithinTenPercentAndKeepsTheRate(t *testing.T) {
	tt := Timetable{Rate: 1000, Connections: 4, Uniform: true, Jitter: true, Seed: 7}
	period := tt.ConnectionPeriod()
	var sum time.Duration
	moved := 0
	const n = 20000
	for i := int64(1000); i < 1000+n; i++ {
		d := tt.Slot(i) - time.Duration(i)*time.Millisecond
		if d < -period/10 || d > period/10 {
			t.Fatalf("Slot(%d) moved by %v, more than 10%% of %v", i, d, period)
		}
		if d != 0 {
			moved++
		}
		sum += d
	}
	if moved < n/2 {
		t.Errorf("jitter moved only %d of %d requests", moved, n)
	}
	if mean := sum / n; mean.Abs() > 20*time.Microsecond {
		t.Errorf("jitter shifts the schedule by %v on average; the rate would drift", mean)
	}
	again, other := tt, tt
	other.Seed++
	if again.Slot(5) != tt.Slot(5) || other.Slot(5) == tt.Slot(5) {
		t.Error("jitter should depend on the seed and i alone")
	}
}

func TestTimetableCountBefore(t *testing.T) {
	for _, tc := range []struct {
		tt   Timetable
		d    time.Duration
		want int64
	}{
		{Timetable{Rate: 1000, Connections: 4}, 10 * time.Second, 10000},
		{Timetable{Rate: 1000, Connections: 4, Uniform: true}, 10 * time.Second, 10000},
		{Timetable{Rate: 3, Connections: 2}, time.Second, 4}, // groups at 0 and 0.67s
		{Timetable{Rate: 3, Connections: 2, Uniform: true}, time.Second, 3},
	} {
		if got := tc.tt.CountBefore(tc.d); got != tc.want {
			t.Errorf("%+v CountBefore(%v) = %d, want %d", tc.tt, tc.d, got, tc.want)
		}
		// CountBefore agrees with Slot.
		var n int64
		for tc.tt.Slot(n) < tc.d {
			n++
		}
		if n != tc.want {
			t.Errorf("%+v: %d slots before %v, CountBefore says %d", tc.tt, n, tc.d, tc.want)
		}
	}
}

func TestUnitFloatIsInUnitInterval(t *testing.T) {
	lo, hi := 1.0, 0.0
	for i := uint64(0); i < 100000; i++ {
		f := unitFloat(42, i)
		if f < 0 || f >= 1 || math.IsNaN(f) {
			t.Fatalf("unitFloat(42, %d) = %v", i, f)
		}
		lo, hi = math.Min(lo, f), math.Max(hi, f)
	}
	if lo > 0.001 || hi < 0.999 {
		t.Errorf("unitFloat covers only [%v, %v]", lo, hi)
	}
}
