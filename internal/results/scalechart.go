package results

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ScaleCurve is one figure of a control-plane scale run (`meshperf cpload
// scale`) against the proxy count: the measured value at each size, the
// growth fitted on them, and what linear growth would look like.
type ScaleCurve struct {
	Title, YLabel string
	// Kind names the chart on the page (data-kind), for readers and tests.
	Kind string
	// Proxies and Values are one per size; a value that is not positive
	// (not measured) is left out, as a log axis cannot place it.
	Proxies, Values []float64
	// Exponent is b of Values = a * Proxies^b as the run fitted it (the
	// slope on the chart); NaN draws no fitted line. FitName is that
	// line's legend.
	Exponent float64
	FitName  string
	// LinearSlope is the slope, on log-log axes, of a cost that is the
	// same per proxy: 1 for a total (CPU, memory), 0 for a per-proxy figure.
	LinearSlope float64
}

// Colours of a scale chart: the measured steps, the fitted power law and
// the linear reference (grey, dashed, drawn through the first size).
var (
	scaleMeasured = color.RGBA{0x00, 0x72, 0xb2, 0xff}
	scaleFitted   = color.RGBA{0xd5, 0x5e, 0x00, 0xff}
	scaleLinear   = color.RGBA{0x77, 0x77, 0x77, 0xff}
)

// ScaleChart draws the curve on log-log axes, where a power law is a
// straight line whose slope is its exponent: the measured point of each
// size, joined; the fitted line with its exponent in the legend; and a
// dashed "linear" line from the first size, which the measured points
// stay on while the cost per proxy stays constant. False when no size has
// a value to draw.
func ScaleChart(c ScaleCurve) (Chart, bool, error) {
	measured := series{name: "measured", color: scaleMeasured}
	for i := range min(len(c.Proxies), len(c.Values)) {
		if x, y := c.Proxies[i], c.Values[i]; drawable(x, true) && drawable(y, true) {
			measured.xs, measured.ys = append(measured.xs, x), append(measured.ys, y)
		}
	}
	if len(measured.xs) == 0 {
		return chart{}, false, nil
	}
	lo, hi := measured.xs[0], measured.xs[len(measured.xs)-1]
	// The fitted and linear lines are drawn without points: the points are
	// the sizes measured.
	var refs []series
	if fit, ok := fittedPowerLaw(measured, c.Exponent); ok && hi > lo {
		refs = append(refs, series{name: c.FitName, xs: []float64{lo, hi}, ys: []float64{fit(lo), fit(hi)},
			color: scaleFitted, dashes: []vg.Length{vg.Points(6), vg.Points(3)}})
	}
	if hi > lo {
		y0 := measured.ys[0]
		refs = append(refs, series{name: "linear (same cost per proxy)", xs: []float64{lo, hi},
			ys: []float64{y0, y0 * math.Pow(hi/lo, c.LinearSlope)}, color: scaleLinear, dashes: []vg.Length{vg.Points(1.5), vg.Points(2.5)}})
	}
	yLo, yHi := math.Inf(1), math.Inf(-1)
	for _, s := range append([]series{measured}, refs...) {
		for _, y := range s.ys {
			yLo, yHi = math.Min(yLo, y), math.Max(yHi, y)
		}
	}
	var refErr error
	ch, err := renderLines(c.Title, "simulated proxies", c.YLabel, []series{measured}, func(p *plot.Plot) {
		for _, r := range refs {
			l, err := plotter.NewLine(plotter.XYs{{X: r.xs[0], Y: r.ys[0]}, {X: r.xs[1], Y: r.ys[1]}})
			if err != nil {
				refErr = fmt.Errorf("chart %q: %w", c.Title, err)
				return
			}
			l.Color, l.Width, l.Dashes = r.color, vg.Points(1.2), r.dashes
			p.Add(l)
			p.Legend.Add(r.name, l)
		}
		xTicks(p, append([]float64(nil), measured.xs...))
		// xTicks goes logarithmic only past a factor of 8; a scale run's
		// exponents read off log-log axes at any span.
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = lo/1.25, hi*1.25
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks125{}
		// At least a factor of 4 (a flat line per proxy stays readable),
		// and the top third left to the legend's three lines.
		bottom := math.Min(yLo/1.5, yHi/4)
		p.Y.Min, p.Y.Max = bottom, yHi*math.Pow(yHi/bottom, 0.5)
	})
	if refErr != nil {
		return chart{}, false, refErr
	}
	ch.Kind = c.Kind
	return ch, true, err
}

// fittedPowerLaw is x -> a * x^b with b the exponent given and a the
// least-squares intercept for it on the logarithms of the measured points
// (the intercept of the fit that found b); false for a NaN exponent.
func fittedPowerLaw(measured series, b float64) (func(float64) float64, bool) {
	if math.IsNaN(b) || math.IsInf(b, 0) || len(measured.xs) < 2 {
		return nil, false
	}
	var mx, my float64
	for i := range measured.xs {
		mx += math.Log(measured.xs[i])
		my += math.Log(measured.ys[i])
	}
	n := float64(len(measured.xs))
	lnA := my/n - b*mx/n
	return func(x float64) float64 { return math.Exp(lnA + b*math.Log(x)) }, true
}

// PageStyle is the CSS of meshperf's HTML reports, for a page written
// outside this package (cpload scale's) to read like the others.
func PageStyle() (template.HTML, error) {
	var b bytes.Buffer
	if err := styleTemplate.ExecuteTemplate(&b, "style", nil); err != nil {
		return "", fmt.Errorf("page style: %w", err)
	}
	return template.HTML(b.String()), nil // our own constant CSS
}
