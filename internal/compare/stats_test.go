package compare

import (
	"math"
	"testing"

	"github.com/meshperf/meshperf/internal/results"
)

func near(got Number, want, tol float64) bool { return math.Abs(float64(got)-want) <= tol }

// TestWelchIntervalTextbook is R's own Welch example, t.test(extra ~ group,
// data = sleep): means 0.75 and 2.33, df 17.776, 95% interval of
// group 1 - group 2 [-3.3654832, 0.2054832]; B-A here is group 2 - group 1.
func TestWelchIntervalTextbook(t *testing.T) {
	group1 := summarize([]float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0})
	group2 := summarize([]float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4})
	if !near(group1.Mean, 0.75, 1e-12) || !near(group2.Mean, 2.33, 1e-12) {
		t.Fatalf("means %v, %v; want 0.75, 2.33", group1.Mean, group2.Mean)
	}
	ci := welchInterval(group1, group2, 0.95)
	if !near(ci.Lo, -0.2054832, 1e-6) || !near(ci.Hi, 3.3654832, 1e-6) {
		t.Errorf("interval [%v, %v], want [-0.2054832, 3.3654832]", ci.Lo, ci.Hi)
	}
	if ci.excludesZero() {
		t.Error("the interval holds 0 (p = 0.079), yet it is called significant")
	}
	if ci99 := welchInterval(group1, group2, 0.99); !(ci99.Lo < ci.Lo && ci99.Hi > ci.Hi) {
		t.Errorf("99%% interval [%v, %v] is not wider than the 95%% one", ci99.Lo, ci99.Hi)
	}
}

func metricOf(a, b []float64) Metric {
	d := metricDef{name: "P90", unit: "ms", get: func(r results.Run, _ results.Latency) float64 { return r.Latency.P90 }}
	side := func(v []float64) *cellRuns {
		c := &cellRuns{}
		for _, x := range v {
			c.runs = append(c.runs, results.Run{Latency: results.Latency{P90: x}})
			c.baselines = append(c.baselines, results.Latency{})
		}
		return c
	}
	return compareMetric(d, side(a), side(b), DefaultOptions)
}

func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float64
		want string
	}{
		{"equal samples", []float64{1.00, 1.02, 0.98, 1.01, 0.99}, []float64{1.00, 1.02, 0.98, 1.01, 0.99}, VerdictUnchanged},
		{"identical constants", []float64{1, 1, 1}, []float64{1, 1, 1}, VerdictUnchanged},
		{"20% slower, small noise", []float64{1.00, 1.02, 0.98, 1.01, 0.99}, []float64{1.20, 1.22, 1.18, 1.21, 1.19}, VerdictWorse},
		{"20% faster, small noise", []float64{1.00, 1.02, 0.98, 1.01, 0.99}, []float64{0.80, 0.82, 0.78, 0.81, 0.79}, VerdictBetter},
		// Significant (the noise is tiny) but within the 5% threshold.
		{"2% slower", []float64{1.000, 1.001, 0.999, 1.000}, []float64{1.020, 1.021, 1.019, 1.020}, VerdictUnchanged},
		// 7% slower on average but the interval reaches below +5%: not
		// shown to be worse by more than the threshold.
		{"7% slower, interval within threshold", []float64{1.00, 1.03, 0.97, 1.02, 0.98}, []float64{1.07, 1.10, 1.04, 1.09, 1.05}, VerdictUnchanged},
		// 7% slower with the whole interval above +5%.
		{"7% slower, interval beyond threshold", []float64{1.000, 1.002, 0.998, 1.001, 0.999}, []float64{1.070, 1.072, 1.068, 1.071, 1.069}, VerdictWorse},
		// 20% apart on average, but the noise swamps it.
		{"20% apart in noise", []float64{0.5, 1.5, 1.0, 0.6, 1.4}, []float64{1.9, 0.7, 1.2, 0.8, 1.4}, VerdictUnchanged},
		{"n=2", []float64{1.00, 1.01}, []float64{2.00, 2.01, 2.02}, VerdictTooFew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metricOf(tc.a, tc.b)
			if m.Verdict != tc.want {
				t.Errorf("verdict %q (diff %v, %v%%, CI [%v, %v]), want %q", m.Verdict, m.Diff, m.DiffPct, m.CI.Lo, m.CI.Hi, tc.want)
			}
		})
	}
	if m := metricOf([]float64{1.00, 1.02, 0.98, 1.01, 0.99}, []float64{1.20, 1.22, 1.18, 1.21, 1.19}); !near(m.Diff, 0.2, 1e-9) || !near(m.DiffPct, 20, 1e-9) || !m.Significant {
		t.Errorf("20%% shift: diff %v (%v%%), significant %v; want 0.2, 20%%, true", m.Diff, m.DiffPct, m.Significant)
	}
}

func TestWorstVerdict(t *testing.T) {
	if got := worst(worst(VerdictBetter, VerdictUnchanged), VerdictTooFew); got != VerdictTooFew {
		t.Errorf("worst of better, ~, too few = %q", got)
	}
	if got := worst(VerdictTooFew, VerdictWorse); got != VerdictWorse {
		t.Errorf("worst of too few, worse = %q", got)
	}
}

// TestPercentileInterval: 10000 calls spread evenly over 0-10 ms in 100
// buckets; P50 is 5 ms, and its 95% interval is the latencies at ranks
// 5000 -+ 1.96*sqrt(10000*0.5*0.5) = 5000 -+ 98, so [4.902, 5.098] ms.
func TestPercentileInterval(t *testing.T) {
	var bs []results.HistogramBucket
	for i := range 100 {
		bs = append(bs, results.HistogramBucket{StartMs: float64(i) / 10, EndMs: float64(i+1) / 10, Count: 100})
	}
	c, ok := cdfFromHistogram(bs)
	if !ok {
		t.Fatal("no distribution from a full histogram")
	}
	v, ci := newPooled([]cdf{c}).percentileInterval(50, 0.95)
	if math.Abs(v-5) > 1e-6 || !near(ci.Lo, 4.902, 2e-4) || !near(ci.Hi, 5.098, 2e-4) {
		t.Errorf("P50 %v [%v, %v], want 5 [4.902, 5.098]", v, ci.Lo, ci.Hi)
	}
	// Two repetitions pooled: twice the calls, an interval 1/sqrt(2) as wide.
	_, ci2 := newPooled([]cdf{c, c}).percentileInterval(50, 0.95)
	if w1, w2 := float64(ci.Hi-ci.Lo), float64(ci2.Hi-ci2.Lo); math.Abs(w2-w1/math.Sqrt2) > 1e-3 {
		t.Errorf("pooled width %v, want %v", w2, w1/math.Sqrt2)
	}
	// The same from a spectrum: min 0, max 10, linear in between.
	r := results.Run{Calls: 10000, Latency: results.Latency{Min: 0, Max: 10}}
	for _, p := range results.SpectrumPercentiles {
		r.Spectrum = append(r.Spectrum, results.PercentileValue{Percentile: p, Ms: p / 10})
	}
	sc, ok := cdfFromSpectrum(r)
	if !ok {
		t.Fatal("no distribution from a spectrum")
	}
	v, ci = newPooled([]cdf{sc}).percentileInterval(99, 0.95)
	// Ranks 9900 -+ 1.96*sqrt(99) = -+19.5: [9.8805, 9.9195] ms.
	if math.Abs(v-9.9) > 1e-6 || !near(ci.Lo, 9.8805, 2e-4) || !near(ci.Hi, 9.9195, 2e-4) {
		t.Errorf("P99 from spectrum %v [%v, %v], want 9.9 [9.8805, 9.9195]", v, ci.Lo, ci.Hi)
	}
}
