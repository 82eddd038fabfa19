package results

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Comparison is the page `meshperf compare -html` writes: the two sides'
// provenance, the comparison's table, and per row the two sides' latency
// overlaid. The compare package fills it; this package draws it with the
// lab report's style and chart code.
type Comparison struct {
	Title    string
	Sides    [2]string        // what A and B are, for the legends: "A: v1.2"
	Facts    []ComparisonFact // provenance, side by side
	Notes    []string         // what differs besides the change (machine, scenario)
	Method   string           // how the statistics were made
	Columns  []string         // the table's header
	Lines    []ComparisonLine // one per row and metric
	Rows     []ComparisonRow  // the charts, one set per row
	Verdict  string
	Footnote string
}

// ComparisonFact is one line of provenance: its name and each side's value.
type ComparisonFact struct{ Name, A, B string }

// ComparisonLine is a line of the table; Verdict sets its colour.
type ComparisonLine struct {
	Cells   []string
	Verdict string
}

// ComparisonRow is one compared cell's heading and each side's latency.
type ComparisonRow struct {
	Heading string
	Verdict string
	Latency [2]*ComparedLatency // nil for a side without a distribution
}

// ComparedLatency is one side's latency at a row, its repetitions pooled.
type ComparedLatency struct {
	Buckets    []HistogramBucket // summed over repetitions; none when read from spectra
	Cumulative []PercentileValue // percent of calls at or below each latency
	Spectrum   []PercentileValue
}

// sideColors tell side A from side B on every comparison chart.
var sideColors = [2]color.RGBA{{0x00, 0x72, 0xb2, 0xff}, {0xd5, 0x5e, 0x00, 0xff}}

// WriteComparisonHTML writes the comparison as one self-contained HTML file.
func WriteComparisonHTML(w io.Writer, c Comparison) error {
	type rowCharts struct {
		ComparisonRow
		Charts []chart
	}
	var rows []rowCharts
	for _, r := range c.Rows {
		charts, err := comparisonCharts(r, c.Sides)
		if err != nil {
			return fmt.Errorf("write comparison page: %w", err)
		}
		rows = append(rows, rowCharts{r, charts})
	}
	data := struct {
		Comparison
		Charted []rowCharts
	}{c, rows}
	if err := comparisonTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("write comparison page: %w", err)
	}
	return nil
}

// comparisonCharts overlays the two sides of a row: their latency
// distributions, as Fortio's UI overlays several results (each side's
// histogram bars and its cumulative percent curve), and their spectra.
func comparisonCharts(r ComparisonRow, sides [2]string) ([]chart, error) {
	var out []chart
	if c, ok, err := distributionChart("Latency distribution, "+r.Heading, r.Latency, sides); err != nil {
		return nil, err
	} else if ok {
		out = append(out, c)
	}
	var ss []series
	for i, l := range r.Latency {
		if l != nil {
			s := series{name: sides[i], color: sideColors[i]}
			s.xs, s.ys = spectrumXY(l.Spectrum)
			ss = append(ss, s)
		}
	}
	c, ok, err := spectrumLines("Latency by percentile, "+r.Heading, ss)
	if ok {
		c.Kind = "compare-spectrum"
		out = append(out, c)
	}
	return out, err
}

// distributionChart draws both sides' histograms as translucent bars (the
// percent of the side's calls in each bucket, left axis) and their
// cumulative percent curves (right axis, 0-100%).
func distributionChart(title string, sides [2]*ComparedLatency, names [2]string) (chart, bool, error) {
	d := &overlaidDistributions{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range sides {
		if s == nil || len(s.Cumulative) < 2 {
			continue
		}
		d.sides = append(d.sides, distributionSide{name: names[i], color: sideColors[i], latency: s})
		d.barMax = math.Max(d.barMax, maxBarPercent(s.Buckets))
		lo, hi = math.Min(lo, s.Cumulative[0].Ms), math.Max(hi, s.Cumulative[len(s.Cumulative)-1].Ms)
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
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-4)
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, d.barMax*topRoom
	c, err := renderChart(p, title)
	c.Kind = "compare-distribution"
	for _, s := range d.sides {
		c.Series = append(c.Series, s.name)
	}
	return c, true, err
}

// topRoom is the headroom above the tallest bar (and the curves' 100%),
// for the legend.
const topRoom = 1.35

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
	rightPercentAxis(c, p, trY, d.barMax)
}

// Thumbnail draws a side's legend swatch: a bar behind its curve.
func (s distributionSide) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(translucent(s.color), []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}})
	mid := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(draw.LineStyle{Color: s.color, Width: vg.Points(1.8)}, c.Min.X, mid, c.Max.X, mid)
}

// verdictClass is the CSS class of a verdict that stands out.
func verdictClass(v string) string {
	switch v {
	case "worse", "better":
		return v
	}
	return "same"
}

// translucent is the colour at 44% opacity (color.RGBA is premultiplied,
// so the alpha goes in an NRGBA).
func translucent(c color.RGBA) color.NRGBA { return color.NRGBA{R: c.R, G: c.G, B: c.B, A: 0x70} }

var comparisonTemplate = template.Must(template.Must(styleTemplate.Clone()).New("comparison").
	Funcs(template.FuncMap{"verdictClass": verdictClass}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{template "style"}}
<style>
tr.worse td{background:#fdecea}tr.better td{background:#e8f5e9}
.verdict-worse{font-weight:600;color:#b00020}.verdict-better{font-weight:600;color:#1b5e20}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>Verdict: <span class="verdict-{{verdictClass .Verdict}}">{{.Verdict}}</span></p>
<table id="provenance">
<thead><tr><th class="l"></th><th class="l">{{index .Sides 0}}</th><th class="l">{{index .Sides 1}}</th></tr></thead>
<tbody>
{{range .Facts}}<tr><td class="l">{{.Name}}</td><td class="l">{{.A}}</td><td class="l">{{.B}}</td></tr>
{{end}}</tbody></table>
{{range .Notes}}<p class="flag">{{.}}</p>
{{end}}<p>{{.Method}}</p>

<h2>Comparison</h2>
<div class="scroll"><table id="comparison">
<thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Lines}}<tr class="{{verdictClass .Verdict}}">{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{else}}<tr><td class="l" colspan="{{len .Columns}}">No cell was measured on both sides.</td></tr>
{{end}}</tbody></table></div>
{{with .Footnote}}<p class="note">{{.}}</p>{{end}}

{{range .Charted}}<h2>{{.Heading}}: <span class="verdict-{{verdictClass .Verdict}}">{{.Verdict}}</span></h2>
<div class="charts">{{range .Charts}}<figure style="margin:0" data-kind="{{.Kind}}" data-series="{{join .Series}}">{{svg .SVG}}</figure>{{end}}</div>
{{end}}
</body>
</html>
`))
