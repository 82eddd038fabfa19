package results

import (
	"math"
	"strings"
	"testing"
)

// A category without a value (a graph's service that served nothing in a
// mode) draws no bar; the others still draw, with their labels. Before,
// its NaN made the axis NaN and the drawing never ended.
func TestBarChartLeavesOutAMissingValue(t *testing.T) {
	sets := []barSet{{mode: ModeNoMesh, values: []float64{1.25, math.NaN()}}, {mode: "ambient", values: []float64{2.5, 0.75}}}
	c, err := barChart("P50 latency of each service", "P50 (ms)", []string{"auth", "main"}, sets, "%.2f")
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"1.25", "2.50", "0.75", "auth", "main"} {
		if !strings.Contains(c.SVG, ">"+label+"<") {
			t.Errorf("the chart has no %q label", label)
		}
	}
	if strings.Contains(c.SVG, "NaN") {
		t.Error("the chart writes NaN")
	}
}
