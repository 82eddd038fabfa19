package results

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts of one point of the matrix (one connection count and rate),
// which every report has, even a single-point run such as `quick`: what
// each mode adds to latency, each mode's latency spectrum, and what each
// proxy costs. They are Istio's performance page at a glance.

// addedLatencyChart draws the added P50/P90/P99 of each mesh mode against
// no-mesh as grouped bars, with whiskers from the lowest to the highest
// repetition.
func addedLatencyChart(p Point) (chart, bool, error) {
	var sets []barSet
	for _, m := range p.Modes {
		if m.Mode == ModeNoMesh || math.IsNaN(m.AddedP90) {
			continue
		}
		sets = append(sets, barSet{mode: m.Mode,
			values: []float64{m.AddedP50, m.AddedP90, m.AddedP99},
			spans:  []Span{m.AddedP50Span, m.AddedP90Span, m.AddedP99Span}})
	}
	if len(sets) == 0 {
		return chart{}, false, nil
	}
	c, err := barChart("Added latency against no-mesh, "+pointText(p), "added latency (ms)",
		[]string{"P50", "P90", "P99"}, sets, "%+.2f")
	c.Kind = "added-latency"
	return c, true, err
}

// proxyCostCharts draws vCPU and MB per proxy, one bar per mode with a
// sidecar or node proxies, and one more for a mode's waypoint ("MODE
// waypoint"), whiskers over repetitions.
func proxyCostCharts(p Point) ([]chart, error) {
	var out []chart
	for _, m := range []struct {
		kind, title, yLabel, format string
		get                         func(ModeResult) (float64, Span)
		getWaypoint                 func(ProxyCost) (float64, Span)
	}{
		{"proxy-cpu", "CPU per proxy", "vCPU per proxy", "%.3f",
			func(m ModeResult) (float64, Span) { return m.VCPUPerProxy, m.VCPUSpan },
			func(c ProxyCost) (float64, Span) { return c.VCPU, c.VCPUSpan }},
		{"proxy-memory", "Memory per proxy", "MB per proxy (RSS)", "%.1f",
			func(m ModeResult) (float64, Span) { return m.MBPerProxy, m.MBSpan },
			func(c ProxyCost) (float64, Span) { return c.MB, c.MBSpan }},
	} {
		var sets []barSet
		var names []string
		bar := func(name string, v float64, s Span) {
			if math.IsNaN(v) {
				return
			}
			// One bar per name, each at its own category.
			sets = append(sets, barSet{mode: name, at: len(names), values: []float64{v}, spans: []Span{s}})
			names = append(names, name)
		}
		for _, mr := range p.Modes {
			v, s := m.get(mr)
			bar(mr.Mode, v, s)
			if c, ok := mr.proxyCost(ProxyWaypoint); ok {
				v, s := m.getWaypoint(c)
				bar(mr.Mode+" "+ProxyWaypoint, v, s)
			}
		}
		if len(sets) == 0 {
			continue
		}
		c, err := barChart(m.title+", "+pointText(p), m.yLabel, names, sets, m.format)
		if err != nil {
			return nil, err
		}
		c.Kind = m.kind
		out = append(out, c)
	}
	return out, nil
}

// spectrumChart overlays each mode's latency spectrum on a percentile axis.
func spectrumChart(p Point) (chart, bool, error) {
	var ss []series
	for _, m := range p.Modes {
		ss = append(ss, series{name: m.Mode})
		ss[len(ss)-1].xs, ss[len(ss)-1].ys = spectrumXY(m.Spectrum)
	}
	return spectrumLines("Latency by percentile, "+pointText(p), ss)
}

// spectrumXY places a spectrum on the percentile axis, leaving out
// latencies a log axis cannot show.
func spectrumXY(spectrum []PercentileValue) (xs, ys []float64) {
	for _, pv := range spectrum {
		if pv.Ms <= 0 || math.IsNaN(pv.Ms) {
			continue
		}
		xs = append(xs, percentileAxisX(pv.Percentile))
		ys = append(ys, pv.Ms)
	}
	return xs, ys
}

// spectrumLines draws spectra on a percentile axis as HdrHistogram plots
// them (x = 1/(1-p), log scaled, labelled 50% to 99.99%), where a tail
// shows as a curve turning up at the right. A series needs two points.
func spectrumLines(title string, all []series) (chart, bool, error) {
	var ss []series
	lo, hi := math.Inf(1), 0.0
	for _, s := range all {
		if len(s.xs) < 2 {
			continue
		}
		ss = append(ss, s)
		for _, y := range s.ys {
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
	}
	if len(ss) == 0 {
		return chart{}, false, nil
	}
	yLabel := "latency (ms)"
	logY := hi/lo >= 20 // a tail this long would flatten the body of every curve
	if logY {
		yLabel = "latency (ms, log scale)"
	}
	c, err := renderLines(title, "percentile", yLabel, ss, func(pl *plot.Plot) {
		pl.X.Scale = plot.LogScale{}
		pl.X.Min, pl.X.Max = percentileAxisX(50)/1.15, percentileAxisX(99.99)*1.15
		var ticks []plot.Tick
		for _, t := range []float64{50, 90, 99, 99.9, 99.99} {
			ticks = append(ticks, plot.Tick{Value: percentileAxisX(t), Label: fmt.Sprintf("%g%%", t)})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
		if logY {
			pl.Y.Scale = plot.LogScale{}
			pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			pl.Y.Min, pl.Y.Max = lo/1.3, hi*2.5 // room for the legend
		} else {
			pl.Y.Min, pl.Y.Max = 0, hi*1.3
		}
	})
	c.Kind = "spectrum"
	return c, true, err
}

func pointText(p Point) string {
	return fmt.Sprintf("%s, %s qps", plural(p.Connections, "connection"), QPSText(p.QPS))
}

// barSet is one mode's bars: values[i] at category at+i, shifted within the
// category so that the sets of a chart stand side by side.
type barSet struct {
	mode   string
	at     int
	values []float64
	spans  []Span
}

// barChart draws sets of bars over named categories, each value written
// above (or below) its bar with format.
func barChart(title, yLabel string, categories []string, sets []barSet, format string) (chart, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	sans(p)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // category lines would run through the bars
	p.Add(grid)
	p.NominalX(categories...)
	// Sets that share a category stand side by side; a set alone in its
	// category (one bar per mode) is centred.
	shared := map[int]int{}
	for _, s := range sets {
		for i := range s.values {
			shared[s.at+i]++
		}
	}
	width := vg.Points(math.Min(34, 150/float64(len(sets))))
	lo, hi, seen := 0.0, 0.0, map[int]int{}
	for i, s := range sets {
		b := &modeBars{set: s, width: width, color: modeColor(s.mode, i), format: format}
		b.offsets = make([]vg.Length, len(s.values))
		for j := range s.values {
			cat := s.at + j
			b.offsets[j] = (vg.Length(seen[cat]) - vg.Length(shared[cat]-1)/2) * width
			seen[cat]++
		}
		p.Add(b)
		p.Legend.Add(s.mode, b)
		for j, v := range s.values {
			// A missing value (a service that served nothing) draws no
			// bar and must not make the axis NaN, on which the plot's
			// tick labelling never ends.
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			if j < len(s.spans) && !math.IsNaN(s.spans[j].Hi) {
				lo, hi = math.Min(lo, s.spans[j].Lo), math.Max(hi, s.spans[j].Hi)
			}
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-4)
	p.Y.Min, p.Y.Max = lo*1.15, hi*1.7 // room for the values and the legend
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	c, err := renderChart(p, title)
	for _, s := range sets {
		c.Series = append(c.Series, s.mode)
	}
	return c, err
}

// modeBars draws one barSet: bars, whiskers for the repetitions' spread,
// and the values. It is a plot.Plotter because gonum's BarChart draws
// neither whiskers nor values at a bar's own offset.
type modeBars struct {
	set     barSet
	offsets []vg.Length
	width   vg.Length
	color   color.Color
	format  string
}

func (b *modeBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	style := draw.TextStyle{Color: color.Black, Font: p.Legend.TextStyle.Font, Handler: p.Legend.TextStyle.Handler}
	style.Font.Size = vg.Points(8)
	whisker := draw.LineStyle{Color: color.RGBA{0x22, 0x22, 0x22, 0xff}, Width: vg.Points(1)}
	for j, v := range b.set.values {
		if math.IsNaN(v) {
			continue
		}
		x := trX(float64(b.set.at+j)) + b.offsets[j]
		left, right := x-b.width/2+vg.Points(1), x+b.width/2-vg.Points(1)
		y0, y1 := trY(0), trY(v)
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{{X: left, Y: y0}, {X: left, Y: y1}, {X: right, Y: y1}, {X: right, Y: y0}}))
		top := y1
		if j < len(b.set.spans) {
			if s := b.set.spans[j]; !math.IsNaN(s.Lo) && s.Hi > s.Lo {
				lo, hi := trY(s.Lo), trY(s.Hi)
				c.StrokeLine2(whisker, x, lo, x, hi)
				c.StrokeLine2(whisker, x-b.width/5, lo, x+b.width/5, lo)
				c.StrokeLine2(whisker, x-b.width/5, hi, x+b.width/5, hi)
				top = max(top, hi)
			}
		}
		label := fmt.Sprintf(b.format, v)
		style.XAlign, style.YAlign = draw.XCenter, draw.YBottom
		y := top + vg.Points(2)
		if v < 0 {
			style.YAlign = draw.YTop
			y = min(y1, y0) - vg.Points(2)
		}
		c.FillText(style, vg.Point{X: x, Y: y}, label)
	}
}

// DataRange covers the categories and zero; the chart sets Y's range.
func (b *modeBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return float64(b.set.at) - 0.5, float64(b.set.at+len(b.set.values)) - 0.5, 0, 0
}

// Thumbnail draws the legend's swatch.
func (b *modeBars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}})
}
