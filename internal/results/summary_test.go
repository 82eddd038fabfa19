package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// mk builds a kept run with the given latencies (ms) and sidecar figures.
func mk(mode string, conn, qps int, p50, p90, p99 float64, actual float64, sidecarVCPU, sidecarMB []float64) Run {
	r := Run{Scenario: "t", RunID: "id", Mode: mode, Connections: conn, RequestedQPS: qps, ActualQPS: actual,
		Network: "netns", Label: mode, Latency: Latency{P50: p50, P90: p90, P99: p99}}
	roles := []string{RoleClientSidecar, RoleServerSidecar}
	for i := range sidecarVCPU {
		r.Processes = append(r.Processes, Process{Role: roles[i], VCPU: sidecarVCPU[i], RSSMB: sidecarMB[i]})
	}
	r.Processes = append(r.Processes, Process{Role: RoleClientApp, VCPU: 0.9, RSSMB: 80})
	return r
}

func TestSummarizeArithmetic(t *testing.T) {
	runs := []Run{
		// no-mesh, three repetitions: medians P50 0.20, P90 0.30, P99 0.50.
		mk("no-mesh", 4, 1000, 0.20, 0.30, 0.50, 1000, nil, nil),
		mk("no-mesh", 4, 1000, 0.25, 0.35, 0.90, 1000, nil, nil),
		mk("no-mesh", 4, 1000, 0.10, 0.28, 0.45, 1000, nil, nil),
		// both-sidecars, two kept repetitions: medians are means of the two.
		// P50 (0.40+0.50)/2 = 0.45; P90 (0.50+0.60)/2 = 0.55; P99 (0.70+0.80)/2 = 0.75.
		// vCPU per proxy: run A mean(0.10,0.30) = 0.20, run B mean(0.20,0.20) = 0.20 -> 0.20.
		// per 1000 rps: A 0.20/1.0 = 0.20, B 0.20/0.8 = 0.25 -> 0.225.
		// MB: A mean(10,20) = 15, B mean(20,30) = 25 -> 20.
		mk("both-sidecars", 4, 1000, 0.40, 0.50, 0.70, 1000, []float64{0.10, 0.30}, []float64{10, 20}),
		mk("both-sidecars", 4, 1000, 0.50, 0.60, 0.80, 800, []float64{0.20, 0.20}, []float64{20, 30}),
		// left out: errors over 10%, and a failure.
		func() Run {
			r := mk("both-sidecars", 4, 1000, 9, 9, 9, 1000, []float64{1, 1}, []float64{1, 1})
			r.ErrorPercent, r.Label = 10.5, "errs"
			return r
		}(),
		func() Run {
			r := mk("both-sidecars", 4, 1000, 9, 9, 9, 1000, nil, nil)
			r.Failed, r.FailureReason, r.Label = true, "proxy exited", "dead"
			return r
		}(),
		// exactly 10% errors is kept (Istio drops only > 10%), at a point with no baseline.
		func() Run {
			r := mk("server-sidecar", 8, 1000, 0.6, 0.7, 0.9, 1000, []float64{0.05}, []float64{11})
			r.ErrorPercent = 10
			return r
		}(),
	}
	s := Summarize(runs)
	if len(s.Points) != 2 || s.Points[0].Connections != 4 || s.Points[1].Connections != 8 {
		t.Fatalf("points %+v", s.Points)
	}
	nm, ok := s.Points[0].mode("no-mesh")
	if !ok || nm.Runs != 3 || !near(nm.P50, 0.20) || !near(nm.P90, 0.30) || !near(nm.P99, 0.50) {
		t.Errorf("no-mesh %+v", nm)
	}
	both, _ := s.Points[0].mode("both-sidecars")
	checks := []struct {
		name      string
		got, want float64
	}{
		{"P50", both.P50, 0.45}, {"P90", both.P90, 0.55}, {"P99", both.P99, 0.75},
		{"+P50", both.AddedP50, 0.25}, {"+P90", both.AddedP90, 0.25}, {"+P99", both.AddedP99, 0.25},
		{"vCPU/proxy", both.VCPUPerProxy, 0.20}, {"vCPU/1k rps", both.VCPUPer1000RPS, 0.225},
		{"MB/proxy", both.MBPerProxy, 20}, {"actual qps", both.ActualQPS, 900},
		// Spans: each repetition against no-mesh's median (P50 0.40 and 0.50
		// against 0.20; P99 0.70 and 0.80 against 0.50), per-proxy figures
		// per repetition.
		{"+P50 low", both.AddedP50Span.Lo, 0.20}, {"+P50 high", both.AddedP50Span.Hi, 0.30},
		{"+P99 low", both.AddedP99Span.Lo, 0.20}, {"+P99 high", both.AddedP99Span.Hi, 0.30},
		{"vCPU low", both.VCPUSpan.Lo, 0.20}, {"vCPU high", both.VCPUSpan.Hi, 0.20},
		{"MB low", both.MBSpan.Lo, 15}, {"MB high", both.MBSpan.Hi, 25},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("both-sidecars %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if both.Runs != 2 {
		t.Errorf("both-sidecars kept %d runs, want 2", both.Runs)
	}
	if !math.IsNaN(nm.VCPUPerProxy) {
		t.Errorf("no-mesh has a proxy cost %v", nm.VCPUPerProxy)
	}
	ss, _ := s.Points[1].mode("server-sidecar")
	if !math.IsNaN(ss.AddedP90) || !math.IsNaN(ss.AddedP90Span.Lo) || ss.Runs != 1 || !near(ss.VCPUPer1000RPS, 0.05) {
		t.Errorf("point without baseline: %+v (added must be NaN)", ss)
	}
	if len(s.Excluded) != 2 || s.Excluded[0].Reason != "10.5% errors (over 10%)" || s.Excluded[1].Reason != "failed: proxy exited" {
		t.Errorf("excluded %+v", s.Excluded)
	}
	if strings.Join(s.Modes, ",") != "no-mesh,server-sidecar,both-sidecars" || s.Network != "netns" || s.Scenario != "t" {
		t.Errorf("modes %v network %q scenario %q", s.Modes, s.Network, s.Scenario)
	}

	var b bytes.Buffer
	if err := WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	wantText(t, "summary", b.String(),
		"P50 ms", "+P90 ms", "vCPU/1k rps", "MB/proxy",
		"  both-sidecars      2   0.450   0.550   0.750   +0.250   +0.250   +0.250       0.200        0.225      20.0",
		"n/a: no no-mesh run at that point",
		"errs: 10.5% errors (over 10%)",
		"dead: failed: proxy exited")
}

// wantText fails the test for each of wants that text (what names it)
// does not contain.
func wantText(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{math.NaN(), 5}, 5}, {[]float64{7}, 7},
	}
	for _, c := range cases {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Median([]float64{math.NaN()})) {
		t.Error("median of nothing must be NaN")
	}
}
