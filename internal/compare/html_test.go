package compare

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestHTMLOverlaysBothSides: the page has, per row, a distribution chart
// and a spectrum chart that each draw both sides, in the sides' colours
// (A's histogram bars translucent blue and B's vermillion, and each
// side's curve).
func TestHTMLOverlaysBothSides(t *testing.T) {
	rep := Compare(side(t, "v1", inv("r1", 1, 0, t.TempDir())), side(t, "v2", inv("r2", 2, 0.2, t.TempDir())), DefaultOptions)
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	figure := regexp.MustCompile(`(?s)<figure style="margin:0" data-kind="([^"]+)" data-series="([^"]*)">(.*?)</figure>`)
	kinds := map[string]int{}
	for _, f := range figure.FindAllStringSubmatch(doc, -1) {
		kind, series, svg := f[1], f[2], f[3]
		kinds[kind]++
		if series != "A: v1,B: v2" {
			t.Errorf("%s chart draws %q, want both sides", kind, series)
		}
		// Each side's curve is a stroked path in its colour.
		for _, colour := range []string{"#0072B2", "#D55E00"} {
			if !strings.Contains(svg, "fill:none;stroke:"+colour) {
				t.Errorf("%s chart has no line in %s", kind, colour)
			}
		}
		if kind == "compare-distribution" {
			// Histogram bars: filled translucent in each side's colour.
			// (vgsvg rounds the colours of translucent fills by a unit.)
			bars := regexp.MustCompile(`fill:#(0071B1|0072B2|D45D00|D55E00);fill-opacity:0\.4`).FindAllStringSubmatch(svg, -1)
			seen := map[string]int{}
			for _, m := range bars {
				seen[map[bool]string{true: "A", false: "B"}[strings.HasPrefix(m[1], "00")]]++
			}
			if seen["A"] < 5 || seen["B"] < 5 {
				t.Errorf("distribution chart bars by side %v, want a histogram of each", seen)
			}
		}
	}
	if kinds["compare-distribution"] != len(rep.Rows) || kinds["compare-spectrum"] != len(rep.Rows) {
		t.Errorf("charts %v, want a distribution and a spectrum for each of %d rows", kinds, len(rep.Rows))
	}
	for _, want := range []string{`<table id="comparison">`, `<table id="provenance">`, "meshperf compare: v2 against v1",
		`<tr class="worse">`, "Welch&#39;s 95% interval"} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
