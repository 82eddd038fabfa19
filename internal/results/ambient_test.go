package results

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// ambientRuns is Istio 1.24's page in small: the four modes at 500, 1000
// and 1500 qps, one repetition, the ambient modes with their node proxies
// (cheap) and ambient-waypoint with its waypoint (costly) as well.
func ambientRuns() []Run {
	var runs []Run
	for _, q := range []int{500, 1000, 1500} {
		k := float64(q) / 1000
		for _, mode := range []string{"no-mesh", "ambient", "ambient-waypoint", "both-sidecars"} {
			r := mk(mode, 4, q, 0.2, 0.3, 0.5, float64(q), nil, nil)
			switch mode {
			case "both-sidecars":
				r = mk(mode, 4, q, 0.5, 0.7, 1.1, float64(q), []float64{0.20 * k, 0.20 * k}, []float64{60, 60})
			case "ambient", "ambient-waypoint":
				r.Latency = Latency{P50: 0.25, P90: 0.35, P99: 0.6}
				r.Processes = append(r.Processes,
					Process{Role: RoleClientNodeProxy, VCPU: 0.05 * k, RSSMB: 11},
					Process{Role: RoleServerNodeProxy, VCPU: 0.07 * k, RSSMB: 13})
				if mode == "ambient-waypoint" {
					r.Latency = Latency{P50: 0.4, P90: 0.6, P99: 0.9}
					r.Processes = append(r.Processes, Process{Role: RoleWaypoint, VCPU: 0.25 * k, RSSMB: 60})
				}
			}
			runs = append(runs, r)
		}
	}
	return runs
}

// Each kind of proxy has its own cost: the node proxies' mean is the
// per-proxy figure of the ambient modes, the waypoint's is apart and never
// averaged into it, and sidecars stay as they were.
func TestSummaryCostPerKindOfProxy(t *testing.T) {
	s := Summarize(ambientRuns())
	p := s.Points[1] // 1000 qps
	if p.QPS != 1000 {
		t.Fatalf("point %+v", p)
	}
	want := map[string][]ProxyCost{
		"no-mesh":          nil,
		"ambient":          {{Kind: ProxyNodeProxy, Count: 2, VCPU: 0.06, VCPUPer1000RPS: 0.06, MB: 12}},
		"ambient-waypoint": {{Kind: ProxyNodeProxy, Count: 2, VCPU: 0.06, VCPUPer1000RPS: 0.06, MB: 12}, {Kind: ProxyWaypoint, Count: 1, VCPU: 0.25, VCPUPer1000RPS: 0.25, MB: 60}},
		"both-sidecars":    {{Kind: ProxySidecar, Count: 2, VCPU: 0.20, VCPUPer1000RPS: 0.20, MB: 60}},
	}
	for mode, costs := range want {
		m, ok := p.mode(mode)
		if !ok || len(m.Proxies) != len(costs) {
			t.Errorf("%s: proxies %+v, want %+v", mode, m.Proxies, costs)
			continue
		}
		for i, c := range costs {
			got := m.Proxies[i]
			if got.Kind != c.Kind || got.Count != c.Count || !near(got.VCPU, c.VCPU) || !near(got.VCPUPer1000RPS, c.VCPUPer1000RPS) ||
				!near(got.MB, c.MB) || !near(got.VCPUSpan.Lo, c.VCPU) || !near(got.MBSpan.Hi, c.MB) {
				t.Errorf("%s: %s cost %+v, want %+v", mode, c.Kind, got, c)
			}
		}
	}
	if wp, _ := p.mode("ambient-waypoint"); !near(wp.VCPUPerProxy, 0.06) || !near(wp.MBPerProxy, 12) {
		t.Errorf("ambient-waypoint per proxy %v vCPU, %v MB: want the node proxies' 0.06 and 12, without the waypoint", wp.VCPUPerProxy, wp.MBPerProxy)
	}
	if !s.AmbientProxies() || Summarize(reportRuns()).AmbientProxies() {
		t.Error("AmbientProxies: want true with node proxies, false with sidecars only")
	}

	var b bytes.Buffer
	if err := WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	wantText(t, "summary", b.String(),
		"cost per proxy, by kind (mean over a run's proxies of the kind, median of repetitions)",
		"4  1000    ambient-waypoint    node proxy        2  0.060        0.060  12.0",
		"4  1000    ambient-waypoint    waypoint          1  0.250        0.250  60.0",
		"4  1000    both-sidecars       sidecar           2  0.200        0.200  60.0")
	// A sidecar-only summary has no second table: its one kind is in the first.
	b.Reset()
	if err := WriteSummary(&b, Summarize(reportRuns())); err != nil || strings.Contains(b.String(), "by kind") {
		t.Errorf("sidecar-only summary (%v):\n%s", err, b.String())
	}
}

// The page of an ambient run: latency against rate has one line per mode
// (P90 and P99 among them, as Istio's charts), the cost per kind of proxy
// is a table, and the cost charts show the waypoint as its own bar and line.
func TestWriteHTMLAmbient(t *testing.T) {
	runs := ambientRuns()
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, Summarize(runs)); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	modes := []string{"no-mesh", "both-sidecars", "ambient", "ambient-waypoint"} // the summary's order
	var latency []string
	for _, f := range figures(t, doc) {
		switch {
		case f.kind == "against-rate" && strings.Contains(f.text, "latency"):
			title, _, _ := strings.Cut(strings.TrimSpace(f.text), ",")
			latency = append(latency, title)
			if !slices.Equal(f.series, modes) {
				t.Errorf("%s: lines %v, want one per mode %v", title, f.series, modes)
			}
		case f.kind == "against-rate":
			want := []string{"both-sidecars", "ambient", "ambient-waypoint", "ambient-waypoint waypoint"}
			if !slices.Equal(f.series, want) {
				t.Errorf("cost against rate: lines %v, want %v", f.series, want)
			}
		case f.kind == "proxy-cpu" || f.kind == "proxy-memory":
			want := []string{"both-sidecars", "ambient", "ambient-waypoint", "ambient-waypoint waypoint"}
			if !slices.Equal(f.series, want) {
				t.Errorf("%s: bars %v, want %v", f.kind, f.series, want)
			}
		}
	}
	if !slices.Equal(latency, []string{"P50 latency", "P90 latency", "P99 latency"}) {
		t.Errorf("latency against rate charts %v, want P50, P90 and P99", latency)
	}
	wantText(t, "report", doc, `<table id="proxy-costs">`, "<h2>Cost per proxy, by kind</h2>",
		`<td class="l">ambient-waypoint</td><td class="l">waypoint</td><td>1</td><td>0.250</td><td>0.250</td><td>60.0</td>`,
		`<td class="l">ambient</td><td class="l">node proxy</td><td>2</td><td>0.060</td><td>0.060</td><td>12.0</td>`,
		"per-proxy figures are the mean of the run's sidecars or node proxies (a waypoint's are in the next table)")
	if math.IsNaN(Summarize(runs).Points[0].Modes[1].VCPUPerProxy) {
		t.Error("ambient has no per-proxy figure")
	}
}
