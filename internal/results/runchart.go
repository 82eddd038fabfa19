package results

import (
	"fmt"
	"image/color"
	"math"
	"regexp"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RunChart is one run's latency picture, as Fortio's UI draws a result:
// the histogram's bars, the percentile lines and the cumulative percent
// curve; or, for a run whose histogram is neither stored nor readable from
// its file, its spectrum.
type RunChart struct {
	Kind string // RunChartHistogram, RunChartSpectrum, or "" when there is nothing to draw
	SVG  string
	// Bars is the number of non-empty buckets drawn: each is one <path>
	// inside the SVG's <g class="histogram-bars">.
	Bars int
}

// The kinds of RunChart.
const (
	RunChartHistogram = "histogram"
	RunChartSpectrum  = "spectrum"
)

// DrawRunLatency draws run r's latency: its histogram (RunHistogram) when
// it has one, else its spectrum.
func DrawRunLatency(title string, r Run) (RunChart, error) {
	if h := RunHistogram(r); len(h) > 0 {
		return histogramChart(title, h, r.Latency)
	}
	s := series{name: r.Mode, color: histogramCurveColor}
	s.xs, s.ys = spectrumXY(r.Spectrum)
	c, ok, err := spectrumLines(title, []series{s})
	if err != nil || !ok {
		return RunChart{}, err
	}
	return RunChart{Kind: RunChartSpectrum, SVG: c.SVG}, nil
}

var (
	// histogramBarColor is the bars' colour and theirs only: the SVG's
	// bars are found by it to be grouped.
	histogramBarColor   = color.RGBA{0x4c, 0x8f, 0xbf, 0xff}
	histogramCurveColor = color.RGBA{0xd5, 0x5e, 0x00, 0xff}
	percentileLineColor = color.RGBA{0x33, 0x33, 0x33, 0xff}
)

// histogramChart draws the buckets as bars (calls per bucket, left axis)
// on a latency axis, a dashed line at each of P50, P90, P99 and P99.9 with
// its value, and the cumulative percent of calls (right axis).
func histogramChart(title string, buckets []HistogramBucket, l Latency) (RunChart, error) {
	h := &latencyBars{buckets: buckets}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, b := range buckets {
		h.total += b.Count
		h.most = max(h.most, b.Count)
		lo, hi = math.Min(lo, b.StartMs), math.Max(hi, b.EndMs)
		if b.Count > 0 {
			h.bars++
		}
	}
	if h.total == 0 || !(hi > lo) {
		return RunChart{}, nil
	}
	for _, pl := range []struct {
		name string
		ms   float64
	}{{"P50", l.P50}, {"P90", l.P90}, {"P99", l.P99}, {"P99.9", l.P999}} {
		if !math.IsNaN(pl.ms) && pl.ms >= lo && pl.ms <= hi {
			h.lines = append(h.lines, percentileLine{pl.name, pl.ms})
		}
	}
	p := latencyPlot(title, "calls per bucket (bars)")
	p.Add(h)
	// Room on the right for the percent axis' labels, clear of the bars.
	p.X.Min, p.X.Max = lo, hi+(hi-lo)*0.1
	p.Y.Min, p.Y.Max = 0, float64(h.most)*topRoom
	c, err := renderChart(p, title)
	if err != nil {
		return RunChart{}, err
	}
	return RunChart{Kind: RunChartHistogram, SVG: groupBars(c.SVG), Bars: h.bars}, nil
}

type percentileLine struct {
	name string
	ms   float64
}

// latencyBars is a plot.Plotter: gonum's histogram takes values, not
// buckets already counted, and has no second axis.
type latencyBars struct {
	buckets     []HistogramBucket
	total, most int64
	bars        int
	lines       []percentileLine
}

func (h *latencyBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.SetColor(histogramBarColor)
	for _, b := range h.buckets {
		if b.Count == 0 {
			continue
		}
		left, right := trX(b.StartMs), max(trX(b.EndMs), trX(b.StartMs)+vg.Points(0.5))
		y := trY(float64(b.Count))
		c.FillPolygon(histogramBarColor, []vg.Point{{X: left, Y: trY(0)}, {X: left, Y: y}, {X: right, Y: y}, {X: right, Y: trY(0)}})
	}
	// The cumulative curve reaches 100% at the tallest bar's height.
	full := float64(h.most)
	curve := []vg.Point{{X: trX(h.buckets[0].StartMs), Y: trY(0)}}
	seen := int64(0)
	for _, b := range h.buckets {
		seen += b.Count
		curve = append(curve, vg.Point{X: trX(b.EndMs), Y: trY(float64(seen) / float64(h.total) * full)})
	}
	c.StrokeLines(draw.LineStyle{Color: histogramCurveColor, Width: vg.Points(1.8)}, curve)
	style := draw.TextStyle{Color: percentileLineColor, Font: p.Y.Tick.Label.Font, Handler: p.Y.Tick.Label.Handler,
		XAlign: draw.XLeft, YAlign: draw.YTop}
	dashed := draw.LineStyle{Color: percentileLineColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	for i, l := range h.lines {
		x := trX(l.ms)
		c.StrokeLine2(dashed, x, trY(0), x, trY(full*topRoom))
		// Labels step down so that close percentiles stay legible.
		y := trY(full*topRoom) - vg.Points(2+11*float64(i))
		c.FillText(style, vg.Point{X: x + vg.Points(2), Y: y}, fmt.Sprintf("%s %s ms", l.name, msLabel(l.ms)))
	}
	rightPercentAxis(c, p, trY, full, topRoom, "cumulative % (line)")
}

func msLabel(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// DataRange is set by the chart: the buckets' span and the tallest bar.
func (h *latencyBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return h.buckets[0].StartMs, h.buckets[len(h.buckets)-1].EndMs, 0, float64(h.most)
}

// latencyPlot is a plot over a latency axis in ms, bars against yLabel:
// a run's histogram, or a comparison's overlaid distributions.
func latencyPlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = yLabel
	sans(p)
	return p
}

// rightPercentAxis draws a 0-100% axis on the plot's right edge, 100% at
// the height of full on the left axis, for the cumulative curves, and its
// name at the top of the body (full*room on the left axis).
func rightPercentAxis(c draw.Canvas, p *plot.Plot, trY func(float64) vg.Length, full, room float64, name string) {
	style := draw.TextStyle{Color: color.Black, Font: p.Y.Tick.Label.Font, Handler: p.Y.Tick.Label.Handler,
		XAlign: draw.XRight, YAlign: draw.YCenter}
	tick := draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)}
	for _, pct := range []float64{0, 25, 50, 75, 100} {
		y := trY(pct / 100 * full)
		c.StrokeLine2(tick, c.Max.X-vg.Points(4), y, c.Max.X, y)
		c.FillText(style, vg.Point{X: c.Max.X - vg.Points(6), Y: y}, fmt.Sprintf("%g%%", pct))
	}
	style.XAlign, style.YAlign = draw.XRight, draw.YTop
	c.FillText(style, vg.Point{X: c.Max.X - vg.Points(6), Y: trY(full*room) - vg.Points(2)}, name)
}

// barPath is one bar as vgsvg writes it: a path filled with the bars' colour.
var barPath = regexp.MustCompile(`<path d="[^"]*" style="fill:` + colorHex(histogramBarColor) + `[;"][^>]*>`)

func colorHex(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// groupBars puts the bars, which the plotter draws one after another, in
// a <g class="histogram-bars">, so that a page (and its tests) can find
// and count them.
func groupBars(svg string) string {
	all := barPath.FindAllStringIndex(svg, -1)
	if len(all) == 0 {
		return svg
	}
	first, last := all[0][0], all[len(all)-1][1]
	return svg[:first] + `<g class="histogram-bars">` + svg[first:last] + `</g>` + svg[last:]
}
