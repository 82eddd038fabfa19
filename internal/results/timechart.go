package results

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// TimeLine is one line of a TimePanel: values at times in seconds.
type TimeLine struct {
	Name   string
	Xs, Ys []float64
	Color  color.Color // nil picks one by the line's place
}

// TimePanel is one chart of TimeChartSVG, e.g. the rate over a run.
type TimePanel struct {
	Title, YLabel string
	Lines         []TimeLine
}

// TimeChartSVG draws panels one above the other over a shared time axis,
// in the report's style, as one SVG document (the dashboard's live
// chart). A panel with no points yet draws its empty axes.
func TimeChartSVG(xLabel string, panels []TimePanel) ([]byte, error) {
	if len(panels) == 0 {
		return nil, fmt.Errorf("time chart: no panels")
	}
	plots := make([][]*plot.Plot, len(panels))
	lo, hi := 0.0, 1.0
	for _, pn := range panels {
		for _, l := range pn.Lines {
			for _, x := range l.Xs {
				hi = max(hi, x)
			}
		}
	}
	for i, pn := range panels {
		ss := make([]series, len(pn.Lines))
		for j, l := range pn.Lines {
			ss[j] = series{name: l.Name, xs: l.Xs, ys: l.Ys, color: l.Color}
		}
		p, _, err := linesPlot(pn.Title, xLabel, pn.YLabel, ss)
		if err != nil {
			return nil, err
		}
		p.X.Min, p.X.Max = lo, hi
		p.Y.Min = 0
		if p.Y.Max <= 0 {
			p.Y.Max = 1
		}
		p.Y.Max *= 1.25 // room for the legend above the lines
		plots[i] = []*plot.Plot{p}
	}
	const width, panelHeight = 5.4 * vg.Inch, 2.3 * vg.Inch
	c := vgsvg.New(width, panelHeight*vg.Length(len(panels)))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(6)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("time chart: %w", err)
	}
	return buf.Bytes(), nil
}

// InlineSVG makes a chart's SVG document an element for an HTML page, as
// the report's charts are: no prolog, sized by the page's CSS.
func InlineSVG(doc []byte, title string) string { return inlineSVG(string(doc), title) }
