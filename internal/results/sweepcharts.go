package results

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshperf/meshperf/internal/capacity"
)

// The charts of a capacity sweep: each mode's latency against the rate it
// actually carried, with its knee and the objectives, and each proxy's CPU
// and memory against the rate with the fitted lines the sizing advice is
// read from. Steps are placed at their actual rate, not the requested
// one: a step that could not keep its rate sits where it really was.

// excludedColor draws the steps where the load generator was the
// bottleneck: they are hollow and not joined, as the analysis leaves them
// out of knees and fits.
var excludedColor = color.RGBA{0x70, 0x70, 0x70, 0xff}

// roleDashes tell a mode's proxies apart on the cost charts, in the order
// their roles are first seen: solid, dashed, dotted, dash-dot.
var roleDashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1.5), vg.Points(2.5)},
	{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
}

// stepPlace says how a step is drawn: joined in its line, hollow and apart
// (generator-bound), or not at all (the run failed: nothing it measured
// counts).
type stepPlace int

const (
	stepJoined stepPlace = iota
	stepExcluded
	stepLeftOut
)

func placeOf(c capacity.Curve, i int) stepPlace {
	if c.Steps[i].Failed {
		return stepLeftOut
	}
	if i < len(c.Judgements) {
		switch c.Judgements[i].Verdict {
		case capacity.RunFailed:
			return stepLeftOut
		case capacity.GeneratorBound:
			return stepExcluded
		}
	}
	return stepJoined
}

// drawable says v can be placed on an axis (a log axis takes only v > 0).
func drawable(v float64, logY bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!logY || v > 0)
}

// sweepAxes tracks the range of what a sweep chart draws, so that the
// axes never take a NaN (on which gonum's tick labelling never ends).
type sweepAxes struct{ lo, hi, xMax float64 }

func newSweepAxes() sweepAxes { return sweepAxes{lo: math.Inf(1), hi: math.Inf(-1)} }

func (a *sweepAxes) add(x, y float64) {
	a.lo, a.hi, a.xMax = math.Min(a.lo, y), math.Max(a.hi, y), math.Max(a.xMax, x)
}

func (a sweepAxes) empty() bool { return math.IsInf(a.hi, -1) }

// set puts x from 0 to past the highest rate, and y from 0 (or, on a log
// axis, below the lowest value) to room above the highest for the legend.
func (a sweepAxes) set(p *plot.Plot, logY bool, room float64) {
	p.X.Min, p.X.Max = 0, math.Max(a.xMax*1.05, 1)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks125{}
		p.Y.Min, p.Y.Max = a.lo/1.5, a.hi*math.Pow(room, 3)
		return
	}
	p.Y.Min, p.Y.Max = 0, math.Max(a.hi*room, 1e-3)
}

// logTicks125 labels a log axis at 1, 2 and 5 times each power of ten
// (unlabelled ticks between): a sweep's latencies often span less than a
// decade, where powers of ten alone would leave one label or none.
type logTicks125 struct{}

func (logTicks125) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil // not a log axis' range: no ticks rather than no end
	}
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		decade := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// sweepLatencyChart draws one percentile's latency against the actual
// rate, one line per mode; the knees as diamonds, the objectives on that
// percentile as dashed lines, generator-bound steps hollow and apart.
func sweepLatencyChart(a capacity.Analysis, pct float64, logY bool) (chart, bool, error) {
	name := percentileName(pct)
	var ss []series
	var excluded, knees plotter.XYs
	var kneeColors []color.Color
	// ax spans every point; scale only those a linear axis is scaled to:
	// a saturated step (the rate not kept, errors) or a generator-bound
	// one can be a thousand times slower than the rest and would flatten
	// the curve where it bends, so on a linear axis it is drawn at the
	// top, marked off the scale (the log-scale chart shows it).
	ax, scale := newSweepAxes(), newSweepAxes()
	// A knee alone, without the steps it was found on, is no chart.
	steps := false
	for i, c := range a.Curves {
		s := series{name: c.Mode, color: modeColor(c.Mode, i)}
		for j, st := range c.Steps {
			ms := stepMS(st, pct)
			place := placeOf(c, j)
			if place == stepLeftOut || !drawable(ms, logY) || !drawable(st.ActualRPS, false) {
				continue
			}
			ax.add(st.ActualRPS, ms)
			if place == stepJoined && !saturated(c, j) {
				scale.add(st.ActualRPS, ms)
			}
			steps = true
			if place == stepExcluded {
				excluded = append(excluded, plotter.XY{X: st.ActualRPS, Y: ms})
				continue
			}
			s.xs, s.ys = append(s.xs, st.ActualRPS), append(s.ys, ms)
		}
		ss = append(ss, s)
		for _, k := range c.Knees {
			if k.Percentile == pct && k.Found && drawable(k.MS, logY) && drawable(k.RPS, false) {
				knees = append(knees, plotter.XY{X: k.RPS, Y: k.MS})
				kneeColors = append(kneeColors, s.color)
				ax.add(k.RPS, k.MS)
				scale.add(k.RPS, k.MS)
			}
		}
	}
	if !steps {
		return chart{}, false, nil
	}
	var lines []objectiveLine
	for _, o := range a.Objectives {
		if ms := float64(o.Limit) / 1e6; o.Percentile == pct && drawable(ms, logY) {
			lines = append(lines, objectiveLine{ms: ms, label: o.String()})
			ax.add(0, ms)
			scale.add(0, ms)
		}
	}
	title, yLabel, kind := name+" latency against rate", name+" latency (ms)", "sweep-latency-"+percentileKey(pct)
	if logY {
		title, yLabel, kind = title+", log scale", name+" latency (ms, log scale)", "sweep-latency-log-"+percentileKey(pct)
	}
	var offScale plotter.XYs
	if !logY && !scale.empty() {
		scale.xMax = ax.xMax
		ax = scale
		// Points above the top of the curve's scale sit on it, marked.
		top := scale.hi * 1.15
		for i := range ss {
			for j, y := range ss[i].ys {
				if y > top {
					ss[i].ys[j] = top
					offScale = append(offScale, plotter.XY{X: ss[i].xs[j], Y: top})
				}
			}
		}
		var kept plotter.XYs
		for _, e := range excluded {
			if e.Y > top {
				offScale = append(offScale, plotter.XY{X: e.X, Y: top})
				continue
			}
			kept = append(kept, e)
		}
		excluded = kept
	}
	p, drawn, err := linesPlot(title, "actual rate (rps)", yLabel, ss)
	if err != nil {
		return chart{}, false, err
	}
	if err := addOffScale(p, offScale); err != nil {
		return chart{}, false, err
	}
	for _, l := range lines {
		p.Add(l)
	}
	if err := addExcluded(p, excluded); err != nil {
		return chart{}, false, err
	}
	if len(knees) > 0 {
		sc, err := plotter.NewScatter(knees)
		if err != nil {
			return chart{}, false, fmt.Errorf("chart %q: %w", title, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: color.RGBA{0xdd, 0xdd, 0xdd, 0xff}, Shape: kneeGlyph{}, Radius: vg.Points(5.5)}
		sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			return draw.GlyphStyle{Color: kneeColors[i], Shape: kneeGlyph{}, Radius: vg.Points(5.5)}
		}
		p.Add(sc)
		p.Legend.Add(name+" knee", sc)
	}
	ax.set(p, logY, 1.35)
	ch, err := renderChart(p, title)
	ch.Kind, ch.Series = kind, drawn
	return ch, true, err
}

// sweepCostChart draws each proxy's vCPU or memory against the actual
// rate ("MODE ROLE", the mode's colour, a dash per role) with its fitted
// line over the rates it was fitted on, R² in the legend.
func sweepCostChart(a capacity.Analysis, metric string) (chart, bool, error) {
	title, yLabel, kind := "CPU per proxy against rate", "vCPU per proxy", "sweep-cpu"
	value := func(u capacity.ProxyUsage) float64 { return u.VCPU }
	if metric == capacity.MetricMemMB {
		title, yLabel, kind = "Memory per proxy against rate", "MB per proxy", "sweep-memory"
		value = func(u capacity.ProxyUsage) float64 { return u.MemMB }
	}
	roleIndex := map[string]int{}
	dashesOf := func(role string) []vg.Length {
		i, ok := roleIndex[role]
		if !ok {
			i = len(roleIndex)
			roleIndex[role] = i
		}
		return roleDashes[i%len(roleDashes)]
	}
	var ss []series
	var excluded plotter.XYs
	var fits []fitLine
	ax := newSweepAxes()
	for i, c := range a.Curves {
		col := modeColor(c.Mode, i)
		at := map[string]int{} // role -> index in ss
		for j, st := range c.Steps {
			place := placeOf(c, j)
			for _, u := range st.Proxies {
				v := value(u)
				if place == stepLeftOut || !drawable(v, false) || !drawable(st.ActualRPS, false) {
					continue
				}
				ax.add(st.ActualRPS, v)
				if place == stepExcluded {
					excluded = append(excluded, plotter.XY{X: st.ActualRPS, Y: v})
					continue
				}
				k, ok := at[u.Role]
				if !ok {
					k = len(ss)
					at[u.Role] = k
					ss = append(ss, series{name: c.Mode + " " + u.Role, color: col, dashes: dashesOf(u.Role)})
				}
				ss[k].xs, ss[k].ys = append(ss[k].xs, st.ActualRPS), append(ss[k].ys, v)
			}
		}
		for _, f := range c.Fits {
			k, ok := at[f.Role]
			if f.Metric != metric || !ok {
				continue
			}
			ss[k].name += ", R² " + r2Text(f.R2)
			lo, hi := f.At(f.MinRPS), f.At(f.MaxRPS)
			if drawable(lo, false) && drawable(hi, false) && drawable(f.MinRPS, false) && drawable(f.MaxRPS, false) && f.MaxRPS > f.MinRPS {
				fits = append(fits, fitLine{from: plotter.XY{X: f.MinRPS, Y: lo}, to: plotter.XY{X: f.MaxRPS, Y: hi}, color: col, dashes: ss[k].dashes})
				ax.add(f.MaxRPS, math.Max(lo, hi))
			}
		}
	}
	if ax.empty() {
		return chart{}, false, nil
	}
	p, drawn, err := linesPlot(title, "actual rate (rps)", yLabel, ss)
	if err != nil {
		return chart{}, false, err
	}
	for _, f := range fits {
		l, err := plotter.NewLine(plotter.XYs{f.from, f.to})
		if err != nil {
			return chart{}, false, fmt.Errorf("chart %q: %w", title, err)
		}
		l.Color, l.Width, l.Dashes = withAlpha(f.color, 0x99), vg.Points(0.8), f.dashes
		p.Add(l)
	}
	if err := addExcluded(p, excluded); err != nil {
		return chart{}, false, err
	}
	// Room for a legend line per proxy above the lines, which start low.
	ax.set(p, false, 1.2+0.09*float64(len(drawn)))
	ch, err := renderChart(p, title)
	ch.Kind, ch.Series = kind, drawn
	return ch, true, err
}

// fitLine is a Fit drawn over the rates it was fitted on.
type fitLine struct {
	from, to plotter.XY
	color    color.Color
	dashes   []vg.Length
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), a}
}

// saturated says curve c's step i gave way (errors, the rate not kept):
// its latency is the queue's, not the curve's.
func saturated(c capacity.Curve, i int) bool {
	if i >= len(c.Judgements) {
		return false
	}
	v := c.Judgements[i].Verdict
	return v == capacity.ErrorsSeen || v == capacity.RateNotKept
}

// addOffScale marks the steps drawn at the top of a linear axis because
// they lie above it, with one legend entry.
func addOffScale(p *plot.Plot, pts plotter.XYs) error {
	if len(pts) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("chart %q: %w", p.Title.Text, err)
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Shape: draw.TriangleGlyph{}, Radius: vg.Points(4)}
	p.Add(sc)
	p.Legend.Add("above the scale (see log scale)", sc)
	return nil
}

// addExcluded draws the generator-bound steps as hollow grey points, not
// joined, with one legend entry.
func addExcluded(p *plot.Plot, pts plotter.XYs) error {
	if len(pts) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("chart %q: %w", p.Title.Text, err)
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: excludedColor, Shape: draw.RingGlyph{}, Radius: vg.Points(3.6)}
	p.Add(sc)
	p.Legend.Add("generator-bound (excluded)", sc)
	return nil
}

// kneeGlyph is a diamond in the mode's colour with a black edge, larger
// than a step's point, so that a knee stands out on its line.
type kneeGlyph struct{}

func (kneeGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	d := []vg.Point{{X: pt.X, Y: pt.Y + r}, {X: pt.X + r, Y: pt.Y}, {X: pt.X, Y: pt.Y - r}, {X: pt.X - r, Y: pt.Y}}
	c.FillPolygon(sty.Color, d)
	c.StrokeLines(draw.LineStyle{Color: color.Black, Width: vg.Points(1.1)}, append(d, d[0]))
}

// objectiveLine is an objective on its percentile's chart: a dashed line
// across the chart at the limit, labelled as the user wrote it.
type objectiveLine struct {
	ms    float64
	label string
}

var objectiveColor = color.RGBA{0xb0, 0x00, 0x20, 0xff}

func (o objectiveLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(o.ms)
	c.StrokeLine2(draw.LineStyle{Color: objectiveColor, Width: vg.Points(1.1), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}},
		c.Min.X, y, c.Max.X, y)
	style := draw.TextStyle{Color: objectiveColor, Font: p.Y.Tick.Label.Font, Handler: p.Y.Tick.Label.Handler,
		XAlign: draw.XRight, YAlign: draw.YBottom}
	c.FillText(style, vg.Point{X: c.Max.X - vg.Points(3), Y: y + vg.Points(2)}, o.label)
}

func r2Text(r2 float64) string {
	if !drawable(r2, false) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", r2)
}
