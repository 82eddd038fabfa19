package capacity

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseObjective(t *testing.T) {
	good := []struct {
		in   string
		want Objective
	}{
		{"p99=5ms", Objective{99, 5 * time.Millisecond}},
		{"P50=1ms", Objective{50, time.Millisecond}},
		{"p99.9=500us", Objective{99.9, 500 * time.Microsecond}},
		{"p99.99=250µs", Objective{99.99, 250 * time.Microsecond}},
		{"p75=1.5s", Objective{75, 1500 * time.Millisecond}},
	}
	for _, tc := range good {
		got, err := ParseObjective(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseObjective(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"p98=5ms", `objective "p98=5ms": percentile 98 is not one of p50, p75, p90, p95, p99, p99.9, p99.99`},
		{"p99", `objective "p99": want pNN=DURATION, e.g. p99=5ms`},
		{"99=5ms", `objective "99=5ms": want pNN=DURATION, e.g. p99=5ms`},
		{"p=5ms", `objective "p=5ms": want pNN=DURATION, e.g. p99=5ms`},
		{"p99=", `objective "p99=": want pNN=DURATION, e.g. p99=5ms`},
		{"pInf=5ms", `objective "pInf=5ms": want pNN=DURATION, e.g. p99=5ms`},
		{"p9.9e1=5ms", `objective "p9.9e1=5ms": want pNN=DURATION, e.g. p99=5ms`},
		{"p99=-1ms", `objective "p99=-1ms": the limit must be above 0`},
		{"p99=0", `objective "p99=0": the limit must be above 0`},
		{"p99=5", `objective "p99=5": the limit "5" is not a duration such as 5ms or 500us`},
		{"", `objective "": want pNN=DURATION, e.g. p99=5ms`},
	}
	for _, tc := range bad {
		_, err := ParseObjective(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseObjective(%q) error = %v; want %s", tc.in, err, tc.want)
		}
	}
}

func TestObjectivesSetRepeatedAndString(t *testing.T) {
	var objs Objectives
	if err := objs.Set("p99=5ms, p50=1ms"); err != nil {
		t.Fatal(err)
	}
	if err := objs.Set("p99.9=20ms"); err != nil {
		t.Fatal(err)
	}
	if got, want := objs.String(), "p99=5ms,p50=1ms,p99.9=20ms"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	// A percentile named twice, across calls or within one, adds nothing.
	for _, v := range []string{"p90=2ms,p99=3ms", "p90=2ms,p90=3ms"} {
		err := objs.Set(v)
		if err == nil || !strings.Contains(err.Error(), "already has an objective") {
			t.Errorf("Set(%q) error = %v; want a duplicate error", v, err)
		}
		if len(objs) != 3 {
			t.Errorf("after Set(%q) failed, %d objectives; want 3 (nothing half-applied)", v, len(objs))
		}
	}
	if err := objs.Set("p90=2ms,bad"); err == nil || len(objs) != 3 {
		t.Errorf("Set with a bad element: err %v, %d objectives; want an error and 3", err, len(objs))
	}
}

func TestParseRange(t *testing.T) {
	good := []struct {
		in    string
		want  Range
		rates []int
	}{
		{"100:500:100", Range{100, 500, 100}, []int{100, 200, 300, 400, 500}},
		{"100:450:100", Range{100, 450, 100}, []int{100, 200, 300, 400, 450}},
		{"100:1000", Range{100, 1000, 0}, []int{100, 200, 400, 800, 1000}},
		{"100:800", Range{100, 800, 0}, []int{100, 200, 400, 800}},
		{"500:500", Range{500, 500, 0}, []int{500}},
		{"1:200:1", Range{1, 200, 1}, nil}, // exactly MaxRates
	}
	for _, tc := range good {
		got, err := ParseRange(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		rates := got.Rates()
		if tc.rates != nil && !reflect.DeepEqual(rates, tc.rates) {
			t.Errorf("%q.Rates() = %v; want %v", tc.in, rates, tc.rates)
		}
		if len(rates) != got.count() || rates[len(rates)-1] != got.End {
			t.Errorf("%q.Rates() = %v: count %d, End %d last once", tc.in, rates, got.count(), got.End)
		}
	}
	bad := []struct{ in, want string }{
		{"2000:100", `range "2000:100": the start 2000 exceeds the end 100`},
		{"500", `range "500": a single rate is not a range; want START:END[:STEP], e.g. 100:2000:100`},
		{"1:2:3:4", `range "1:2:3:4": want START:END[:STEP], e.g. 100:2000:100`},
		{"0:100", `range "0:100": the start must be at least 1 rps`},
		{"a:100", `range "a:100": the start "a" is not a whole number`},
		{"1:1.5", `range "1:1.5": the end "1.5" is not a whole number`},
		{"1:100:0", `range "1:100:0": the step must be at least 1`},
		{"1:100:", `range "1:100:": the step "" is not a whole number`},
		{"1:2000000:10000", `range "1:2000000:10000": the end 2000000 exceeds 1000000 rps`},
		{"1:201:1", `range "1:201:1": it makes 201 rates, at most 200; use a larger step`},
		{"100:1000000:1", `range "100:1000000:1": it makes 999901 rates, at most 200; use a larger step`},
	}
	for _, tc := range bad {
		_, err := ParseRange(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseRange(%q) error = %v; want %s", tc.in, err, tc.want)
		}
	}
}

func TestStepAt(t *testing.T) {
	s := Step{Latency: []PercentileMS{{50, 0.4}, {99, 2.5}, {99.9, nan}}}
	if ms, ok := s.At(99); !ok || ms != 2.5 {
		t.Errorf("At(99) = %v, %v; want 2.5, true", ms, ok)
	}
	if _, ok := s.At(90); ok {
		t.Error("At(90) found a percentile the step does not have")
	}
	if _, ok := s.At(99.9); ok {
		t.Error("At(99.9) took NaN for a measurement")
	}
}

func FuzzParseObjective(f *testing.F) {
	for _, seed := range []string{"p99=5ms", "P99.9=500us", "p98=1s", "p99=-1ms", "p50=1µs", "p99"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObjective(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error on more than one line: %q", err)
			}
			return
		}
		again, err := ParseObjective(o.String())
		if err != nil || again != o {
			t.Errorf("%q → %v → %q → %v, %v", s, o, o.String(), again, err)
		}
	})
}

func FuzzParseRange(f *testing.F) {
	for _, seed := range []string{"100:2000:100", "100:1000", "1:1", "2000:100", "1:1000000:5000"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			return
		}
		rates := r.Rates()
		if len(rates) == 0 || len(rates) > MaxRates || rates[0] != r.Start || rates[len(rates)-1] != r.End {
			t.Errorf("%q: rates %v", s, rates)
		}
		again, err := ParseRange(r.String())
		if err != nil || again != r {
			t.Errorf("%q → %v → %q → %v, %v", s, r, r.String(), again, err)
		}
	})
}
