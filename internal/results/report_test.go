package results

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// figure is one chart of a rendered page: its data-kind, its data-series,
// and the text drawn in its SVG (titles, ticks, legend, values).
type figure struct {
	kind   string
	series []string
	text   string
}

// figures parses the page and returns its charts in order.
func figures(t *testing.T, doc string) []figure {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []figure
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "figure" {
			f := figure{}
			for _, a := range n.Attr {
				switch a.Key {
				case "data-kind":
					f.kind = a.Val
				case "data-series":
					if a.Val != "" {
						f.series = strings.Split(a.Val, ",")
					}
				}
			}
			var b strings.Builder
			nodeText(n, &b, "\n")
			f.text = b.String()
			out = append(out, f)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// nodeText writes the text under n, each text node followed by sep.
func nodeText(n *html.Node, b *strings.Builder, sep string) {
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
		b.WriteString(sep)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		nodeText(c, b, sep)
	}
}

func countKinds(fs []figure) map[string]int {
	m := map[string]int{}
	for _, f := range fs {
		m[f.kind]++
	}
	return m
}

// quickRuns is what `meshperf lab run quick -repetitions 3` stores: one
// point (4 connections, 1000 qps), the four modes, three repetitions each,
// with spectra and process figures.
func quickRuns() []Run {
	var runs []Run
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	add := map[string]float64{"no-mesh": 0, "server-sidecar": 0.2, "client-sidecar": 0.25, "both-sidecars": 0.5}
	for rep := 1; rep <= 3; rep++ {
		for _, mode := range []string{"no-mesh", "server-sidecar", "client-sidecar", "both-sidecars"} {
			a := add[mode] + 0.01*float64(rep)
			var vcpu, mb []float64
			switch mode {
			case "server-sidecar", "client-sidecar":
				vcpu, mb = []float64{0.05 + 0.01*float64(rep)}, []float64{10 + float64(rep)}
			case "both-sidecars":
				vcpu, mb = []float64{0.06, 0.07 + 0.01*float64(rep)}, []float64{11, 12}
			}
			r := mk(mode, 4, 1000, 0.3+a, 0.45+a, 0.7+a, 1000, vcpu, mb)
			r.RunID, r.Scenario, r.Repetition, r.Protocol, r.Corrected = "quick1", "quick", rep, "http", true
			r.Label = fmt.Sprintf("quick1_qps_1000_c_4_1024_%s_%d", mode, rep)
			r.StartTime = t0.Add(time.Duration(len(runs)) * 20 * time.Second)
			r.Latency.Min, r.Latency.Max, r.Latency.Avg = 0.1, 40, 0.4
			r.Latency.P75, r.Latency.P999, r.Latency.P9999 = 0.4+a, 2+a, 35+a
			for _, p := range SpectrumPercentiles {
				// A body that grows slowly and a tail that turns up.
				r.Spectrum = append(r.Spectrum, PercentileValue{p, 0.3 + a + 0.02*percentileAxisX(p)/10 + a*percentileAxisX(p)/1000})
			}
			runs = append(runs, r)
		}
	}
	return runs
}

// The report of a single-point run, rendered from what the store keeps,
// draws added latency, the spectrum and the proxies' cost, each with one
// series per mode it applies to, and nothing that needs an axis.
func TestReportFromStoredRun(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "meshperf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range quickRuns() {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(Filter{RunID: "quick1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 12 || len(runs[0].Spectrum) != len(SpectrumPercentiles) {
		t.Fatalf("stored %d runs, the first with %d spectrum points", len(runs), len(runs[0].Spectrum))
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, Summarize(runs)); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	all := []string{"no-mesh", "server-sidecar", "client-sidecar", "both-sidecars"}
	sidecars := all[1:]
	want := []struct {
		kind   string
		series []string
		texts  []string // drawn in the chart besides the series names
	}{
		// Medians of the repetitions: +0.200/+0.250/+0.500 at every percentile.
		{"added-latency", sidecars, []string{"P50", "P90", "P99", "+0.20", "+0.25", "+0.50"}},
		{"spectrum", all, []string{"50%", "90%", "99%", "99.9%", "99.99%", "percentile"}},
		// Per proxy: server and client sidecar medians 0.07, both 0.075.
		{"proxy-cpu", sidecars, []string{"0.070", "0.075"}},
		{"proxy-memory", sidecars, []string{"12.0", "11.5"}},
	}
	got := figures(t, doc)
	if len(got) != len(want) {
		t.Fatalf("%d charts (%v), want %d", len(got), countKinds(got), len(want))
	}
	for i, w := range want {
		f := got[i]
		if f.kind != w.kind || !slices.Equal(f.series, w.series) {
			t.Errorf("chart %d: %s with series %v, want %s with %v", i, f.kind, f.series, w.kind, w.series)
		}
		for _, s := range append(slices.Clone(w.series), w.texts...) {
			if !strings.Contains(f.text, s+"\n") {
				t.Errorf("%s chart does not draw %q; its text:\n%s", f.kind, s, f.text)
			}
		}
	}
	if strings.Contains(doc, "No chart") || strings.Contains(doc, "against connections") || strings.Contains(doc, "against request rate") {
		t.Error("a single-point report has sections for axes it does not have")
	}
}
