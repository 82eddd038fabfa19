package driver_test

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/results"
)

// scaleFixture is three sizes of a churning run whose control plane's name
// would break a page that did not escape it.
func scaleFixture() *driver.ScaleReport {
	sr := &driver.ScaleReport{}
	for i, m := range []int{1, 2, 5} {
		proxies := 2000 * m
		r := &driver.Report{Shape: "uniform", Scoping: driver.ScopeNamespace, Proxies: proxies, Services: 1000 * m,
			Churn: &driver.ChurnFigures{Kind: "endpoints", EndToEnd: driver.Percentiles{P99: float64(40 + 10*i)}}}
		r.Provenance.ControlPlane = results.Component{Name: `<script>alert("cp")</script>`, Version: "1.0 & more"}
		connect := 0.002 * float64(proxies) * (1 + 0.1*float64(i))
		rss := 100 + 0.05*float64(proxies)
		sr.Steps = append(sr.Steps, driver.ScaleStep{Multiple: m, Proxies: proxies, Services: 1000 * m,
			SyncedMs: 3 * float64(proxies), CPUSeconds: 2 * connect, ConnectCPUSeconds: connect, PeakRSSMB: rss,
			ConnectCPUPerProxyMs: 1000 * connect / float64(proxies), RSSPerProxyKB: 1024 * rss / float64(proxies),
			RSSPerServiceKB: 1024 * rss / float64(1000*m), ChangeP99Ms: r.Churn.EndToEnd.P99, Report: r})
	}
	var proxies, sync, cpu, rss []float64
	for _, s := range sr.Steps {
		proxies = append(proxies, float64(s.Proxies))
		sync, cpu, rss = append(sync, s.SyncedMs), append(cpu, s.ConnectCPUSeconds), append(rss, s.PeakRSSMB)
	}
	sr.Growth = driver.Growth{Sync: driver.GrowthExponent(proxies, sync), ConnectCPU: driver.GrowthExponent(proxies, cpu), PeakRSS: driver.GrowthExponent(proxies, rss)}
	sr.CostRatio = sr.Steps[2].ConnectCPUPerProxyMs / sr.Steps[0].ConnectCPUPerProxyMs
	return sr
}

// figureSVG is each <figure data-kind=...>'s SVG text, by kind.
func figureSVGs(t *testing.T, doc string) map[string]string {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "figure" {
			kind := ""
			for _, a := range n.Attr {
				if a.Key == "data-kind" {
					kind = a.Val
				}
			}
			var b bytes.Buffer
			svgs := 0
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "svg" {
					svgs++
					if err := html.Render(&b, c); err != nil {
						t.Fatal(err)
					}
				}
			}
			if svgs != 1 {
				t.Errorf("figure %q holds %d svg elements, want 1", kind, svgs)
			}
			if _, dup := out[kind]; dup {
				t.Errorf("two figures of kind %q", kind)
			}
			out[kind] = b.String()
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// circleGlyph is gonum's point marker as vgsvg draws it: a closed path of
// two arcs (lines and axes have none).
var circleGlyph = regexp.MustCompile(`d="M[-0-9.,]+A[^"]*Z"`)

func TestScalePage(t *testing.T) {
	sr := scaleFixture()
	var b bytes.Buffer
	if err := sr.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	if path := os.Getenv("MESHPERF_SCALE_PAGE"); path != "" { // to look at it
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, external := range []string{"<script", "<link", "src=", "href=", "url("} {
		if strings.Contains(doc, external) {
			t.Errorf("the page holds %q: it must be self-contained and escape its labels", external)
		}
	}
	if !strings.Contains(doc, "&lt;script&gt;alert(&#34;cp&#34;)&lt;/script&gt; 1.0 &amp; more") {
		t.Error("the control plane's name is not on the page, escaped")
	}
	figs := figureSVGs(t, doc)
	for _, kind := range []string{"scale-connect-cpu", "scale-rss", "scale-sync", "scale-change-p99"} {
		svg, ok := figs[kind]
		if !ok {
			t.Errorf("no %s chart; charts %v", kind, figs)
			continue
		}
		// A point per size, and the legend's one for the measured line.
		if got := len(circleGlyph.FindAllString(svg, -1)); got != len(sr.Steps)+1 {
			t.Errorf("%s: %d points, want %d sizes and the legend's", kind, got, len(sr.Steps)+1)
		}
		for _, text := range []string{"linear (same cost per proxy)", "2000", "4000", "10000"} {
			if !strings.Contains(svg, ">"+text+"<") {
				t.Errorf("%s lacks %q", kind, text)
			}
		}
	}
	if len(figs) != 4 {
		t.Errorf("%d charts, want 4", len(figs))
	}
	// The per-proxy charts give the total's exponent, as the table does.
	cpuFit := "fitted: total grows as proxies^" + strings.TrimSpace(strings.TrimPrefix(
		regexp.MustCompile(`connect CPU [0-9.]+`).FindString(doc), "connect CPU "))
	if !strings.Contains(figs["scale-connect-cpu"], cpuFit) {
		t.Errorf("the connect CPU chart lacks %q", cpuFit)
	}
	for _, row := range []string{"<td>1x</td><td>2000</td><td>1000</td>", "<td>5x</td><td>10000</td><td>5000</td>"} {
		if !strings.Contains(doc, row) {
			t.Errorf("the steps table lacks the row starting %s", row)
		}
	}
}

// Without churn there is no change P99 to draw, and one size has no fit.
func TestScalePageLeavesOutWhatWasNotMeasured(t *testing.T) {
	sr := scaleFixture()
	sr.Steps = sr.Steps[:1]
	sr.Steps[0].Report.Churn, sr.Steps[0].ChangeP99Ms = nil, 0
	sr.Growth = driver.Growth{Sync: math.NaN(), ConnectCPU: math.NaN(), PeakRSS: math.NaN()}
	var b bytes.Buffer
	if err := sr.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	figs := figureSVGs(t, b.String())
	if _, ok := figs["scale-change-p99"]; ok || len(figs) != 3 {
		t.Errorf("charts %d (change P99 drawn: %v), want 3 without it", len(figs), ok)
	}
	for kind, svg := range figs {
		if strings.Contains(svg, "fitted") || strings.Contains(svg, "linear") {
			t.Errorf("%s draws a fit or a linear line through one size", kind)
		}
	}
}
