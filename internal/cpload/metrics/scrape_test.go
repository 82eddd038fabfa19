package metrics

import (
	"math"
	"strings"
	"testing"
)

// exposition has pilot's convergence histogram (istiod's buckets) in two
// series, so that sums by le are exercised, and pushes by type.
const before = `# TYPE pilot_proxy_convergence_time histogram
pilot_proxy_convergence_time_bucket{le="0.1"} 10
pilot_proxy_convergence_time_bucket{le="0.5"} 10
pilot_proxy_convergence_time_bucket{le="1"} 10
pilot_proxy_convergence_time_bucket{le="+Inf"} 10
pilot_proxy_convergence_time_sum 0.2
pilot_proxy_convergence_time_count 10
# TYPE pilot_xds_pushes counter
pilot_xds_pushes{type="cds"} 5
pilot_xds_pushes{type="eds"} 7
`

const after = `# TYPE pilot_proxy_convergence_time histogram
pilot_proxy_convergence_time_bucket{le="0.1"} 60
pilot_proxy_convergence_time_bucket{le="0.5"} 90
pilot_proxy_convergence_time_bucket{le="1"} 108
pilot_proxy_convergence_time_bucket{le="+Inf"} 110
pilot_proxy_convergence_time_sum 30.2
pilot_proxy_convergence_time_count 110
# TYPE pilot_xds_pushes counter
pilot_xds_pushes{type="cds"} 25
pilot_xds_pushes{type="eds"} 17
pilot_xds_pushes{type="cds_senderr"} 1
`

func parse(t *testing.T, s string) *Snapshot {
	t.Helper()
	snap, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestQuantileOfDelta checks histogram_quantile's arithmetic on the buckets
// observed between two scrapes. The delta is 50 in (0, 0.1], 30 in
// (0.1, 0.5], 18 in (0.5, 1], 2 above 1: 100 observations.
//
//	P50: rank 50, in the first bucket: 0 + 0.1*50/50        = 0.1
//	P25: rank 25, first bucket:         0 + 0.1*25/50        = 0.05
//	P80: rank 80, end of the second:    0.1 + 0.4*(80-50)/30 = 0.5
//	P90: rank 90, third bucket:         0.5 + 0.5*(90-80)/18 = 0.7777...
//	P70: rank 70, second bucket:        0.1 + 0.4*20/30      = 0.3666...
//	P99: rank 99, the +Inf bucket:      the highest finite bound, 1
//	P95: rank 95, third bucket:         0.5 + 0.5*(95-80)/18 = 0.91666...
func TestQuantileOfDelta(t *testing.T) {
	h := parse(t, after).Histogram("pilot_proxy_convergence_time").Sub(parse(t, before).Histogram("pilot_proxy_convergence_time"))
	if h.Count != 100 || math.Abs(h.Sum-30) > 1e-9 {
		t.Fatalf("delta count %v sum %v, want 100 and 30", h.Count, h.Sum)
	}
	for _, tc := range []struct{ q, want float64 }{
		{0.5, 0.1}, {0.25, 0.05}, {0.8, 0.5}, {0.9, 0.5 + 0.5*10/18}, {0.7, 0.1 + 0.4*20/30}, {0.99, 1}, {0.95, 0.5 + 0.5*15/18},
	} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile %v = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (Histogram{}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of no observations = %v, want NaN", got)
	}
	if got := h.Quantile(1.5); !math.IsInf(got, 1) {
		t.Errorf("quantile 1.5 = %v, want +Inf", got)
	}
}

func TestSumsAndLabels(t *testing.T) {
	a, b := parse(t, before), parse(t, after)
	if got := b.Sum("pilot_xds_pushes") - a.Sum("pilot_xds_pushes"); got != 31 {
		t.Errorf("push delta %v, want 31", got)
	}
	by := b.By("pilot_xds_pushes", "type")
	if by["cds"] != 25 || by["eds"] != 17 || by["cds_senderr"] != 1 {
		t.Errorf("by type %v", by)
	}
	if b.Has("nope") || b.Sum("nope") != 0 {
		t.Error("an absent metric must sum to 0 and not be there")
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("pilot_xds_pushes{type=\"cds\" 1\n")); err == nil {
		t.Fatal("parsed a broken exposition")
	}
}
