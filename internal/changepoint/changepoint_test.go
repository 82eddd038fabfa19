package changepoint

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// noisy returns n points around level with the coefficient of variation
// cv (normal noise), from a seeded source so every run sees the same series.
func noisy(r *rand.Rand, n int, level, cv float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = level * (1 + cv*r.NormFloat64())
	}
	return xs
}

// ecpOptions are the test settings of ecp, the method's authors' R package
// (0.05, 199 permutations): the method's statistical properties are tested
// at its published level; the stricter defaults have tests of their own.
func ecpOptions() Options {
	o := DefaultOptions()
	o.Significance, o.Permutations = 0.05, 199
	return o
}

func detect(t *testing.T, xs []float64) []ChangePoint {
	t.Helper()
	cps, err := Detect(xs, ecpOptions())
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// flagged are the change points beyond the threshold.
func flagged(cps []ChangePoint) []ChangePoint {
	var out []ChangePoint
	for _, cp := range cps {
		if cp.Shift != ShiftBelowThreshold {
			out = append(out, cp)
		}
	}
	return out
}

// TestStepFoundAtItsIndex: two levels 20% apart. At low noise the step is
// found exactly; at 5-8% the points next to it may look like the other
// level (a point 2 sigma low), and the estimate may move by one or two.
func TestStepFoundAtItsIndex(t *testing.T) {
	for _, c := range []struct {
		cv        float64
		tolerance int
	}{{0.01, 0}, {0.02, 0}, {0.03, 0}, {0.05, 2}, {0.08, 2}} {
		for seed := uint64(1); seed <= 5; seed++ {
			r := rand.New(rand.NewPCG(seed, 1))
			xs := append(noisy(r, 10, 100, c.cv), noisy(r, 10, 120, c.cv)...)
			cps := flagged(detect(t, xs))
			if len(cps) != 1 {
				t.Fatalf("cv %v seed %d: %d change points beyond the threshold %+v, want 1 at 10", c.cv, seed, len(cps), cps)
			}
			cp := cps[0]
			if cp.Index < 10-c.tolerance || cp.Index > 10+c.tolerance || cp.Shift != Increase || cp.PValue > 0.05 {
				t.Errorf("cv %v seed %d: %+v, want an increase at 10 (+-%d) with p <= 0.05", c.cv, seed, cp, c.tolerance)
			}
			if math.Abs(cp.Relative-0.2) > 0.05 {
				t.Errorf("cv %v seed %d: %+v, want about +20%%", c.cv, seed, cp)
			}
			if c.tolerance == 0 && (cp.Before != mean(xs[:10]) || cp.After != mean(xs[10:])) {
				t.Errorf("cv %v seed %d: %+v, want the two levels' means", c.cv, seed, cp)
			}
		}
	}
}

// TestNoStepNoChangePoint is the "noise must not raise alarms":
// ten points of an unchanged build at the noise a shared machine shows
// (3-8% CV), the first ten noise seeds. A test at the 0.05 level calls one
// unchanged series in twenty changed: at the defaults at most a few of
// these thirty may have a change point, and at 0.01 none does.
func TestNoStepNoChangePoint(t *testing.T) {
	strict := DefaultOptions()
	withChange := 0
	for _, cv := range []float64{0.03, 0.05, 0.08} {
		for seed := uint64(1); seed <= 10; seed++ {
			xs := noisy(rand.New(rand.NewPCG(seed, 2)), 10, 100, cv)
			if len(detect(t, xs)) > 0 {
				withChange++
			}
			if cps, err := Detect(xs, strict); err != nil || len(cps) != 0 {
				t.Errorf("cv %v seed %d, significance 0.01: %+v %v in a series without a step", cv, seed, cps, err)
			}
		}
	}
	if withChange > 3 {
		t.Errorf("%d of 30 series without a step have a change point at 0.05, want about 1.5", withChange)
	}
}

// TestFalseAlarmRateIsTheSignificance checks the permutation test's
// p-values: on series without a step, a change point is found in about
// Significance of them, not more (a wrong p-value shows here), and a
// modest step (10% at 5% noise) is found in most series.
func TestFalseAlarmRateIsTheSignificance(t *testing.T) {
	const series = 400
	alarms, found := 0, 0
	for seed := uint64(1); seed <= series; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		if len(detect(t, noisy(r, 16, 100, 0.05))) > 0 {
			alarms++
		}
		cps := detect(t, append(noisy(r, 8, 100, 0.05), noisy(r, 8, 110, 0.05)...))
		if len(cps) == 1 && cps[0].Index >= 6 && cps[0].Index <= 10 {
			found++
		}
	}
	// 0.05 of 400 is 20, with a standard deviation of 4.4.
	if alarms > 33 {
		t.Errorf("%d of %d series without a step have a change point, want about %d", alarms, series, series/20)
	}
	if alarms == 0 {
		t.Errorf("no series without a step has a change point: the test is not at its 0.05 level")
	}
	if found < series*6/10 {
		t.Errorf("a 10%% step at 5%% noise found (within 2 points) in only %d of %d series", found, series)
	}
}

func TestTwoStepsFound(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		xs := append(append(noisy(r, 12, 100, 0.03), noisy(r, 12, 130, 0.03)...), noisy(r, 12, 100, 0.03)...)
		cps := flagged(detect(t, xs))
		if len(cps) != 2 || cps[0].Index != 12 || cps[1].Index != 24 {
			t.Fatalf("seed %d: %+v, want change points at 12 and 24", seed, cps)
		}
		if cps[0].Shift != Increase || cps[1].Shift != Decrease {
			t.Errorf("seed %d: %v then %v, want an increase then a decrease", seed, cps[0].Shift, cps[1].Shift)
		}
		if math.Abs(cps[0].After-mean(xs[12:24])) > 1e-9 || math.Abs(cps[1].Before-mean(xs[12:24])) > 1e-9 {
			t.Errorf("seed %d: means %+v, want the middle segment's mean on both sides of it", seed, cps)
		}
	}
}

func TestSmallSignificantShiftIsBelowThreshold(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	xs := append(noisy(r, 10, 100, 0.002), noisy(r, 10, 103, 0.002)...)
	cps := detect(t, xs)
	if len(cps) != 1 || cps[0].Index != 10 {
		t.Fatalf("%+v, want a change point at 10", cps)
	}
	if cps[0].Shift != ShiftBelowThreshold || cps[0].PValue > 0.05 {
		t.Errorf("%+v: a significant 3%% change is a shift below the 5%% threshold", cps[0])
	}
	o := ecpOptions()
	o.Threshold = 0.01
	cps, err := Detect(xs, o)
	if err != nil || len(cps) != 1 || cps[0].Shift != Increase {
		t.Errorf("threshold 1%%: %+v %v, want an increase", cps, err)
	}
}

func TestDegenerateSeries(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for name, xs := range map[string][]float64{
		"empty":    nil,
		"one":      {1},
		"two":      {1, 2},
		"three":    {1, 2, 300},
		"constant": {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
		"zeros":    make([]float64, 20),
		"all NaN":  {nan, nan, nan, nan, nan, nan, nan, nan},
		"infinite": {inf, -inf, inf, 1, 1, 1, 1},
		"huge":     {1e308, -1e308, 1e308, -1e308, 1e308, -1e308, 1e308, -1e308},
	} {
		if cps := detect(t, xs); len(cps) != 0 {
			t.Errorf("%s: %+v, want none", name, cps)
		}
	}
}

// TestMissingPointsKeepIndices: NaNs are skipped, and the change point's
// index is still the series'.
func TestMissingPointsKeepIndices(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	xs := append(noisy(r, 10, 100, 0.03), noisy(r, 10, 150, 0.03)...)
	xs = append(xs[:10:10], append([]float64{math.NaN(), math.NaN()}, xs[10:]...)...) // the first two of the new level are missing
	xs[3] = math.NaN()
	cps := detect(t, xs)
	if len(cps) != 1 || cps[0].Index != 12 {
		t.Fatalf("%+v, want one change point at 12 (the first point present after the step)", cps)
	}
	if math.IsNaN(cps[0].Before) || math.IsNaN(cps[0].After) {
		t.Errorf("%+v: means over the points present", cps[0])
	}
}

func TestDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	xs := append(noisy(r, 5, 100, 0.08), noisy(r, 5, 112, 0.08)...) // borderline: the p-value depends on the shuffles
	a, b := detect(t, xs), detect(t, xs)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same series, same options: %+v then %+v", a, b)
	}
}

// TestBestSplitMatchesTheDefinition checks the incremental sums against
// the statistic computed from its definition at every split.
func TestBestSplitMatchesTheDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	xs := append(noisy(r, 9, 10, 0.2), noisy(r, 14, 13, 0.2)...)
	for _, bounds := range [][2]int{{0, len(xs)}, {3, 17}, {5, 11}} {
		start, end := bounds[0], bounds[1]
		wantTau, wantQ := -1, math.Inf(-1)
		for tau := start + 2; tau <= end-2; tau++ {
			if q := divergence(xs[start:tau], xs[tau:end]); q > wantQ {
				wantTau, wantQ = tau, q
			}
		}
		tau, q := bestSplit(xs, start, end, 2)
		if tau != wantTau || math.Abs(q-wantQ) > 1e-9*math.Abs(wantQ) {
			t.Errorf("[%d,%d): split %d Q %v, want %d Q %v", start, end, tau, q, wantTau, wantQ)
		}
	}
	if tau, _ := bestSplit(xs, 0, 5, 3); tau != -1 {
		t.Errorf("5 points, 3 a side: split at %d, want none", tau)
	}
}

// divergence is Matteson and James's Q for alpha = 1, term by term.
func divergence(left, right []float64) float64 {
	avg := func(a, b []float64, same bool) float64 {
		sum, n := 0.0, 0
		for i := range a {
			for j := range b {
				if same && j <= i {
					continue
				}
				sum += math.Abs(a[i] - b[j])
				n++
			}
		}
		return sum / float64(n)
	}
	m, n := float64(len(left)), float64(len(right))
	return m * n / (m + n) * (2*avg(left, right, false) - avg(left, left, true) - avg(right, right, true))
}

func TestMinPoints(t *testing.T) {
	if got := ecpOptions().MinPoints(); got != 8 {
		t.Errorf("MinPoints() = %d at 0.05, want 8 (C(8,4) = 70, 2/70 < 0.05; C(7,3) = 35, 2/35 > 0.05)", got)
	}
	if got := DefaultOptions().MinPoints(); got != 10 {
		t.Errorf("MinPoints() = %d with the defaults, want 10 (2/C(10,5) = 0.008 < 0.01; 2/C(9,4) = 0.016)", got)
	}
	o := ecpOptions()
	o.Significance = 0.1
	if got := o.MinPoints(); got != 6 {
		t.Errorf("MinPoints() = %d at 0.1, want 6 (2/C(6,3) = 0.1)", got)
	}
	if cps := detect(t, []float64{1, 1.01, 0.99, 1, 2, 2.01, 1.99, 2}); len(cps) != 1 || cps[0].Index != 4 {
		t.Errorf("8 points: %+v, want one at 4", cps)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, change := range []func(*Options){
		func(o *Options) { o.Permutations = 0 },
		func(o *Options) { o.Significance = 0 },
		func(o *Options) { o.Significance = 1 },
		func(o *Options) { o.Significance = math.NaN() },
		func(o *Options) { o.MinSegment = 1 },
		func(o *Options) { o.Threshold = -0.1 },
		func(o *Options) { o.Threshold = math.NaN() },
	} {
		o := DefaultOptions()
		change(&o)
		if _, err := Detect([]float64{1, 2, 3}, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func FuzzDetect(f *testing.F) {
	f.Add([]byte{1, 1, 1, 1, 1, 9, 9, 9, 9, 9}, uint8(3))
	f.Add([]byte{}, uint8(2))
	f.Add([]byte{0, 255, 0, 255, 0, 255, 0, 255}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, minSegment uint8) {
		xs := make([]float64, 0, len(data)/2)
		for i := 0; i+1 < len(data); i += 2 {
			switch data[i] {
			case 0xff:
				xs = append(xs, math.NaN())
			case 0xfe:
				xs = append(xs, math.Inf(1))
			default:
				xs = append(xs, float64(data[i])*float64(data[i+1]))
			}
		}
		o := DefaultOptions()
		o.Permutations = 19
		o.MinSegment = int(minSegment%6) + 2
		cps, err := Detect(xs, o)
		if err != nil {
			t.Fatal(err)
		}
		prev := 0
		for _, cp := range cps {
			if cp.Index <= prev || cp.Index >= len(xs) {
				t.Fatalf("change point at %d of %d points (previous %d)", cp.Index, len(xs), prev)
			}
			prev = cp.Index
		}
	})
}

// TestDefaultsFindARegressionAfterAnUnchangedStretch: the shape of a
// project's history: ten invocations of an unchanged build at the noise of
// a shared machine, then five of a build 20% slower. At the defaults the
// unchanged stretch alone has no change point, and the whole series has
// one, at the first slow invocation (or next to it), flagged as an increase.
func TestDefaultsFindARegressionAfterAnUnchangedStretch(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		unchanged := noisy(r, 10, 100, 0.05)
		cps, err := Detect(unchanged, DefaultOptions())
		if err != nil || len(cps) != 0 {
			t.Errorf("seed %d: unchanged stretch: %+v %v, want no change point", seed, cps, err)
		}
		xs := append(unchanged, noisy(r, 5, 120, 0.05)...)
		cps, err = Detect(xs, DefaultOptions())
		if err != nil || len(flagged(cps)) != 1 || cps[0].Shift != Increase || cps[0].Index < 9 || cps[0].Index > 11 {
			t.Errorf("seed %d: %+v %v, want one increase at 10", seed, cps, err)
		}
	}
}
