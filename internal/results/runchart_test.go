package results

import (
	"math"
	"regexp"
	"strings"
	"testing"
)

func TestDrawRunLatencyGroupsOneBarPerNonEmptyBucket(t *testing.T) {
	r := Run{Mode: "no-mesh", Latency: Latency{P50: 1.2, P90: 2.5, P99: 4.1, P999: 20, Min: 0.5, Max: 9}, // P99.9 is off the buckets
		Histogram: []HistogramBucket{{0.5, 1, 10}, {1, 2, 50}, {2, 3, 0}, {3, 5, 30}, {5, 9, 10}}}
	c, err := DrawRunLatency("one run", r)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != RunChartHistogram || c.Bars != 4 {
		t.Fatalf("kind %q with %d bars, want a histogram of 4 (one bucket is empty)", c.Kind, c.Bars)
	}
	group := regexp.MustCompile(`(?s)<g class="histogram-bars">(.*?)</g>`).FindStringSubmatch(c.SVG)
	if group == nil || strings.Count(group[1], "<path ") != 4 {
		t.Errorf("want 4 paths in the bars' group, got %v", group)
	}
	for _, label := range []string{"P50 1.20 ms", "P90 2.50 ms", "P99 4.10 ms", "cumulative % (line)", "100%"} {
		if !strings.Contains(c.SVG, label) {
			t.Errorf("chart lacks %q", label)
		}
	}
	if strings.Contains(c.SVG, "P99.9") {
		t.Error("a percentile beyond the buckets is drawn")
	}

	// Without a histogram (stored before schema 5, its file gone), the spectrum.
	r.Histogram, r.FortioJSON = nil, "/nonexistent/result.json"
	r.Spectrum = []PercentileValue{{50, 1.2}, {90, 2.5}, {99, 4.1}}
	if c, err = DrawRunLatency("one run", r); err != nil || c.Kind != RunChartSpectrum || c.Bars != 0 || c.SVG == "" {
		t.Errorf("without a histogram: %q, %d bars, %v; want its spectrum", c.Kind, c.Bars, err)
	}
	r.Spectrum, r.Latency = nil, Latency{P50: math.NaN()}
	if c, err = DrawRunLatency("one run", r); err != nil || c.Kind != "" {
		t.Errorf("with nothing to draw: %q, %v", c.Kind, err)
	}
}
