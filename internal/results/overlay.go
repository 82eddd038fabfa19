package results

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is a chart drawn for a page, with what it shows: pages outside
// this package (the dashboard's) place the charts drawn here.
type Chart = chart

// OverlaidLatency is one run's latency on an overlaid chart, named for its
// legend: a side of `meshperf compare -html`, or one of the runs picked on
// the dashboard's compare page.
type OverlaidLatency struct {
	Name    string
	Latency *ComparedLatency
}

// overlayColors tell the overlaid runs apart (Okabe and Ito's palette,
// which colour-blind readers can tell apart too); the first is the
// baseline's.
var overlayColors = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, {0xd5, 0x5e, 0x00, 0xff}, {0x00, 0x9e, 0x73, 0xff}, {0xcc, 0x79, 0xa7, 0xff},
	{0x56, 0xb4, 0xe9, 0xff}, {0xe6, 0x9f, 0x00, 0xff}, {0x00, 0x00, 0x00, 0xff}, {0x99, 0x99, 0x99, 0xff},
}

func overlayColor(i int) color.RGBA { return overlayColors[i%len(overlayColors)] }

// OverlaidLatencyCharts overlays several runs' latency at one cell
// (heading says which), as Fortio's UI overlays several results: a chart
// of their distributions (each run's histogram as translucent bars, its
// cumulative percent curve and its P50, P90 and P99 lines) and a chart of
// their spectra on a percentile axis. Each run keeps its colour, in the
// order given, on both. Runs without a distribution are left out; a chart
// that would have none is not drawn.
func OverlaidLatencyCharts(heading string, runs []OverlaidLatency) ([]Chart, error) {
	var out []chart
	if c, ok, err := distributionChart("Latency distribution, "+heading, runs); err != nil {
		return nil, err
	} else if ok {
		out = append(out, c)
	}
	var ss []series
	for i, r := range runs {
		if r.Latency != nil {
			s := series{name: r.Name, color: overlayColor(i)}
			s.xs, s.ys = spectrumXY(r.Latency.Spectrum)
			ss = append(ss, s)
		}
	}
	c, ok, err := spectrumLines("Latency by percentile, "+heading, ss)
	if ok {
		c.Kind = "compare-spectrum"
		out = append(out, c)
	}
	return out, err
}

// distributionChart draws the runs' histograms as translucent bars (the
// percent of the run's calls in each bucket, left axis), their cumulative
// percent curves (right axis, 0-100%) and their percentile lines.
func distributionChart(title string, runs []OverlaidLatency) (chart, bool, error) {
	d := &overlaidDistributions{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range runs {
		l := r.Latency
		if l == nil || len(l.Cumulative) < 2 {
			continue
		}
		d.sides = append(d.sides, distributionSide{name: r.Name, color: overlayColor(i), latency: l})
		d.barMax = math.Max(d.barMax, maxBarPercent(l.Buckets))
		lo, hi = math.Min(lo, l.Cumulative[0].Ms), math.Max(hi, l.Cumulative[len(l.Cumulative)-1].Ms)
	}
	if len(d.sides) == 0 || !(hi > lo) {
		return chart{}, false, nil
	}
	if d.barMax == 0 {
		d.barMax = 100 // no histogram: the curves use the whole height
	}
	p := latencyPlot(title, "% of calls per bucket (bars)")
	p.Add(d)
	for _, s := range d.sides {
		p.Legend.Add(s.name, s)
	}
	// The legend sits top right, under the right axis' name: the
	// percentile lines' labels stand at the top of the body, on the left.
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(-8), vg.Points(-18)
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, d.barMax*d.room()
	c, err := renderChart(p, title)
	c.Kind = "compare-distribution"
	for _, s := range d.sides {
		c.Series = append(c.Series, s.name)
	}
	return c, true, err
}

// markedPercentiles are the percentiles each run's distribution marks
// with a vertical line, as Fortio's histograms do.
var markedPercentiles = []float64{50, 90, 99}

// topRoom is the headroom above the tallest bar (and the curves' 100%)
// for a legend of two runs; each further run's line takes a little more.
const topRoom = 1.35

func (d *overlaidDistributions) room() float64 {
	return topRoom + 0.08*float64(max(0, len(d.sides)-2))
}

func maxBarPercent(bs []HistogramBucket) float64 {
	total, most := int64(0), int64(0)
	for _, b := range bs {
		total, most = total+b.Count, max(most, b.Count)
	}
	if total == 0 {
		return 0
	}
	return 100 * float64(most) / float64(total)
}

// overlaidDistributions is a plot.Plotter: gonum's bar charts take
// categories, not latency ranges, and have no second axis.
type overlaidDistributions struct {
	sides  []distributionSide
	barMax float64 // the left axis' tallest bar; the curves' 100% is drawn there
}

type distributionSide struct {
	name    string
	color   color.RGBA
	latency *ComparedLatency
}

func (d *overlaidDistributions) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, s := range d.sides {
		total := int64(0)
		for _, b := range s.latency.Buckets {
			total += b.Count
		}
		fill := translucent(s.color) // so that overlapping bars show both sides
		for _, b := range s.latency.Buckets {
			y := 100 * float64(b.Count) / float64(total)
			left, right := trX(b.StartMs), trX(b.EndMs)
			c.FillPolygon(fill, c.ClipPolygonXY([]vg.Point{{X: left, Y: trY(0)}, {X: left, Y: trY(y)}, {X: right, Y: trY(y)}, {X: right, Y: trY(0)}}))
		}
		var curve []vg.Point
		for _, pv := range s.latency.Cumulative {
			curve = append(curve, vg.Point{X: trX(pv.Ms), Y: trY(pv.Percentile / 100 * d.barMax)})
		}
		c.StrokeLines(draw.LineStyle{Color: s.color, Width: vg.Points(1.8)}, c.ClipLinesXY(curve)...)
	}
	d.plotPercentiles(c, p)
	rightPercentAxis(c, p, trY, d.barMax, d.room(), "cumulative % (lines)")
}

// Thumbnail draws a side's legend swatch: a bar behind its curve.
func (s distributionSide) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(translucent(s.color), []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}})
	mid := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(draw.LineStyle{Color: s.color, Width: vg.Points(1.8)}, c.Min.X, mid, c.Max.X, mid)
}

// plotPercentiles draws each run's P50, P90 and P99 as dashed vertical
// lines in its colour, labelled at their top; the labels of the runs stack
// so that close lines keep readable labels.
func (d *overlaidDistributions) plotPercentiles(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	font := p.Y.Tick.Label.Font
	font.Size = vg.Points(8)
	for i, s := range d.sides {
		dashed := draw.LineStyle{Color: s.color, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}
		label := draw.TextStyle{Color: s.color, Font: font, Handler: p.Y.Tick.Label.Handler, XAlign: draw.XCenter, YAlign: draw.YBottom}
		top := trY(d.barMax*1.02) + vg.Points(9*float64(i))
		for _, pv := range s.latency.Spectrum {
			if !slices.Contains(markedPercentiles, pv.Percentile) || pv.Ms < p.X.Min || pv.Ms > p.X.Max {
				continue
			}
			x := trX(pv.Ms)
			c.StrokeLine2(dashed, x, trY(0), x, top)
			c.FillText(label, vg.Point{X: x, Y: top}, fmt.Sprintf("P%g", pv.Percentile))
		}
	}
}
