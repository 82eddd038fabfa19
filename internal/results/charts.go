package results

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// series is one line of a chart: a mode's values along the x axis. Its
// colour is the mode's unless color is set (a comparison's sides).
type series struct {
	name   string
	xs, ys []float64
	color  color.Color
	// dashes, when set, dash the line: a sweep's proxies of one mode share
	// its colour and tell their roles apart by it.
	dashes []vg.Length
}

// chart is a rendered SVG with its title, for the page; Kind names what it
// shows and Series the modes drawn, so that the page (and its tests) can
// say which chart is which.
type chart struct {
	Title  string
	Kind   string
	Series []string
	SVG    string
}

// modeColors keeps a mode's colour the same on every chart: grey for the
// baseline, then colours that stay apart for colour-blind readers.
var modeColors = map[string]color.RGBA{
	ModeNoMesh:                 {0x55, 0x55, 0x55, 0xff},
	"server-sidecar":           {0x00, 0x72, 0xb2, 0xff},
	"client-sidecar":           {0xe6, 0x9f, 0x00, 0xff},
	"both-sidecars":            {0xd5, 0x5e, 0x00, 0xff},
	"ambient":                  {0x00, 0x9e, 0x73, 0xff},
	"ambient-ztunnel":          {0x56, 0xb4, 0xe9, 0xff},
	"ambient-waypoint":         {0xcc, 0x79, 0xa7, 0xff},
	"ambient-waypoint-ztunnel": {0x00, 0x00, 0x00, 0xff},
}

// modeColor is the mode's colour, or one made from the series' index for a
// mode without one.
func modeColor(mode string, i int) color.RGBA {
	if c, ok := modeColors[mode]; ok {
		return c
	}
	return color.RGBA{uint8(40 * i), 0x99, 0x66, 0xff}
}

// lineChart draws one chart against a measured axis: a line with points
// per series, ticks at the measured x values, and a log x axis when the
// values span a factor of 8 or more (connection counts double).
func lineChart(title, xLabel, yLabel string, ss []series) (chart, error) {
	return renderLines(title, xLabel, yLabel, ss, func(p *plot.Plot) {
		p.Y.Min = 0
		if p.Y.Max <= 0 {
			p.Y.Max = 1
		}
		p.Y.Max *= 1.25 // room for the legend above the lines
		var xs []float64
		for _, s := range ss {
			for j, y := range s.ys {
				if !math.IsNaN(y) && !math.IsInf(y, 0) {
					xs = append(xs, s.xs[j])
				}
			}
		}
		xTicks(p, xs)
	})
}

// renderLines draws series as lines with points and a legend; axes sets
// the scales and ranges.
func renderLines(title, xLabel, yLabel string, ss []series, axes func(*plot.Plot)) (chart, error) {
	p, drawn, err := linesPlot(title, xLabel, yLabel, ss)
	if err != nil {
		return chart{}, err
	}
	axes(p)
	c, err := renderChart(p, title)
	c.Series = drawn
	return c, err
}

// linesPlot is renderLines' plot before its axes are set and it is drawn;
// drawn names the series that had a point to draw.
func linesPlot(title, xLabel, yLabel string, ss []series) (p *plot.Plot, drawn []string, err error) {
	p = plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	sans(p)
	p.Add(plotter.NewGrid())
	for i, s := range ss {
		pts := make(plotter.XYs, 0, len(s.xs))
		for j := range s.xs {
			if !math.IsNaN(s.ys[j]) && !math.IsInf(s.ys[j], 0) {
				pts = append(pts, plotter.XY{X: s.xs[j], Y: s.ys[j]})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, nil, fmt.Errorf("chart %q: %w", title, err)
		}
		var c color.Color = modeColor(s.name, i)
		if s.color != nil {
			c = s.color
		}
		line.Color, line.Width, line.Dashes = c, vg.Points(1.8), s.dashes
		points.Color, points.Shape, points.Radius = c, draw.CircleGlyph{}, vg.Points(2.6)
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
		drawn = append(drawn, s.name)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-4)
	return p, drawn, nil
}

// renderChart writes the plot as an SVG element for the page.
func renderChart(p *plot.Plot, title string) (chart, error) {
	c := vgsvg.New(5.4*vg.Inch, 3.4*vg.Inch)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return chart{}, fmt.Errorf("chart %q: %w", title, err)
	}
	return chart{Title: title, SVG: inlineSVG(buf.String(), title)}, nil
}

func sans(p *plot.Plot) {
	p.Title.TextStyle.Font.Variant = "Sans"
	p.Title.TextStyle.Font.Size = vg.Points(12)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Variant = "Sans"
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Variant = "Sans"
		a.Tick.Label.Font.Size = vg.Points(9.5)
	}
	p.Legend.TextStyle.Font.Variant = "Sans"
	p.Legend.TextStyle.Font.Size = vg.Points(10)
}

// xTicks labels exactly the measured x values.
func xTicks(p *plot.Plot, xs []float64) {
	sort.Float64s(xs)
	var ticks []plot.Tick
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			ticks = append(ticks, plot.Tick{Value: x, Label: fmt.Sprint(x)})
		}
	}
	if len(ticks) == 0 {
		return
	}
	lo, hi := ticks[0].Value, ticks[len(ticks)-1].Value
	if lo > 0 && hi/lo >= 8 {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = lo/1.25, hi*1.25
	} else {
		pad := (hi - lo) * 0.06
		if pad == 0 {
			pad = math.Max(1, lo*0.1)
		}
		p.X.Min, p.X.Max = lo-pad, hi+pad
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
}

var (
	svgProlog = regexp.MustCompile(`(?s)^.*?<svg `)
	svgSize   = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`)
)

// inlineSVG makes vgsvg's document an element that sits in HTML: no XML
// prolog, and a size the page's CSS sets (the viewBox keeps the shape).
func inlineSVG(doc, title string) string {
	doc = svgProlog.ReplaceAllString(doc, "<svg ")
	return svgSize.ReplaceAllString(doc, `<svg class="chart" role="img" aria-label="`+htmlAttr(title)+`"`)
}

func htmlAttr(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString("&quot;")
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
