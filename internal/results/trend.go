package results

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// TrendMark is a change point marked on a trend chart.
type TrendMark struct {
	// Index is the first point at the new level; the marker stands between
	// it and the point before.
	Index int
	Label string // "+50.0% regression"
	// Shift colours the marker: +1 worse (red), -1 better (green), 0 a
	// shift below the threshold (grey).
	Shift int
}

// Colours of the trend markers, the dashboard's .worse and .better.
var (
	trendWorse  = color.RGBA{0xb4, 0x00, 0x00, 0xff}
	trendBetter = color.RGBA{0x00, 0x73, 0x4f, 0xff}
	trendLevel  = color.RGBA{0x77, 0x77, 0x77, 0xff}
	trendLine   = color.RGBA{0x00, 0x72, 0xb2, 0xff}
)

// TrendChart draws a figure across a scenario's invocations, as `meshperf
// history` lists it: one point per group (version, commit or date), named
// on the x axis in order, with the change points history found marked as
// labelled vertical lines between the groups on either side. Points
// without a figure (NaN) are left out; false when none has one.
func TrendChart(title, name, yLabel string, groups []string, values []float64, marks []TrendMark) (Chart, bool, error) {
	s := series{name: name, color: trendLine}
	hi := 0.0
	for i, v := range values {
		s.xs, s.ys = append(s.xs, float64(i)), append(s.ys, v)
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			hi = math.Max(hi, v)
		}
	}
	if len(s.xs) == 0 || !anyFinite(values) {
		return chart{}, false, nil
	}
	c, err := renderLines(title, "", yLabel, []series{s}, func(p *plot.Plot) {
		p.Y.Min, p.Y.Max = 0, math.Max(hi, 1e-9)*1.35 // room for the legend and the markers' labels
		p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
		ticks := make([]plot.Tick, len(groups))
		for i, g := range groups {
			ticks[i] = plot.Tick{Value: float64(i), Label: g}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		if len(groups) > 6 { // dates and commits would overlap flat
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
		}
		p.Add(trendMarks(marks))
	})
	c.Kind = "trend"
	return c, true, err
}

func anyFinite(vs []float64) bool {
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true
		}
	}
	return false
}

// trendMarks is a plot.Plotter drawing the change points: gonum has no
// vertical annotation.
type trendMarks []TrendMark

func (ms trendMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	font := p.Y.Tick.Label.Font
	font.Size = vg.Points(9)
	for i, m := range ms {
		col := trendLevel
		switch {
		case m.Shift > 0:
			col = trendWorse
		case m.Shift < 0:
			col = trendBetter
		}
		x := trX(float64(m.Index) - 0.5)
		top := trY(p.Y.Max) - vg.Points(14+11*float64(i))
		c.StrokeLine2(draw.LineStyle{Color: col, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}, x, trY(p.Y.Min), x, top)
		// The label reads away from the nearer edge, so that it stays on the chart.
		style := draw.TextStyle{Color: col, Font: font, Handler: p.Y.Tick.Label.Handler, XAlign: draw.XLeft, YAlign: draw.YBottom}
		at := vg.Point{X: x + vg.Points(3), Y: top}
		if x > (c.Min.X+c.Max.X)/2 {
			style.XAlign, at.X = draw.XRight, x-vg.Points(3)
		}
		c.FillText(style, at, m.Label)
	}
}
