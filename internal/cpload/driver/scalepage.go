package driver

import (
	"fmt"
	"html/template"
	"io"

	"github.com/meshperf/meshperf/internal/results"
)

// scaleFigure is one chart of the scale page: a figure per size against
// the proxy count.
type scaleFigure struct {
	kind, title, yLabel string
	value               func(ScaleStep) float64
	// perProxy: the figure is a total divided by the proxies, so the
	// total's exponent is the chart's slope plus one, and linear growth
	// is flat.
	perProxy bool
	// total is the fitted exponent of the total; nil fits the figure here.
	total func(Growth) float64
}

var scaleFigures = []scaleFigure{
	{kind: "scale-connect-cpu", title: "Connect CPU per proxy", yLabel: "CPU ms per proxy", perProxy: true,
		value: func(s ScaleStep) float64 { return s.ConnectCPUPerProxyMs }, total: func(g Growth) float64 { return g.ConnectCPU }},
	{kind: "scale-rss", title: "Peak memory per proxy", yLabel: "peak RSS KB per proxy", perProxy: true,
		value: func(s ScaleStep) float64 { return s.RSSPerProxyKB }, total: func(g Growth) float64 { return g.PeakRSS }},
	{kind: "scale-sync", title: "Time to sync every proxy", yLabel: "seconds to all synced",
		value: func(s ScaleStep) float64 { return s.SyncedMs / 1000 }, total: func(g Growth) float64 { return g.Sync }},
	{kind: "scale-change-p99", title: "Change P99, end to end", yLabel: "change P99 ms",
		value: func(s ScaleStep) float64 { return s.ChangeP99Ms }},
}

// Charts draws the scale run's figures against the proxy count on log-log
// axes (results.ScaleChart), in scaleFigures' order; a figure no step
// measured (change P99 without churn) is left out.
func (sr *ScaleReport) Charts() ([]results.Chart, error) {
	var out []results.Chart
	proxies := make([]float64, len(sr.Steps))
	for i, s := range sr.Steps {
		proxies[i] = float64(s.Proxies)
	}
	for _, f := range scaleFigures {
		values := make([]float64, len(sr.Steps))
		for i, s := range sr.Steps {
			values[i] = f.value(s)
		}
		curve := results.ScaleCurve{Title: f.title, YLabel: f.yLabel, Kind: f.kind, Proxies: proxies, Values: values}
		var total float64
		if f.total != nil {
			total = f.total(sr.Growth)
		} else {
			total = GrowthExponent(proxies, values)
		}
		curve.Exponent, curve.LinearSlope = total, 1
		curve.FitName = fmt.Sprintf("fitted: grows as proxies^%.2f", total)
		if f.perProxy {
			// The per-proxy figure's fit is the total's divided by x.
			curve.Exponent, curve.LinearSlope = total-1, 0
			curve.FitName = fmt.Sprintf("fitted: total grows as proxies^%.2f", total)
		}
		c, ok, err := results.ScaleChart(curve)
		if err != nil {
			return nil, fmt.Errorf("scale chart %q: %w", f.title, err)
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// WriteHTML writes the scale run as one self-contained page (no external
// assets): the table Print gives, the fitted growth, and the charts.
func (sr *ScaleReport) WriteHTML(w io.Writer) error {
	if len(sr.Steps) == 0 {
		return fmt.Errorf("scale page: no step was run")
	}
	charts, err := sr.Charts()
	if err != nil {
		return err
	}
	style, err := results.PageStyle()
	if err != nil {
		return err
	}
	first := sr.Steps[0].Report
	data := struct {
		*ScaleReport
		Style                                  template.HTML
		Shape, Scoping, Protocol, ControlPlane string
		Charts                                 []results.Chart
	}{sr, style, first.Shape, string(first.Scoping), protocol(first.Delta), controlPlaneName(first), charts}
	if err := scalePage.Execute(w, data); err != nil {
		return fmt.Errorf("scale page: %w", err)
	}
	return nil
}

var scalePage = template.Must(template.New("scale").Funcs(template.FuncMap{
	"f1":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":       func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"exponent": exponent,
	"seconds":  func(ms float64) string { return fmt.Sprintf("%.1f", ms/1000) },
	"p99": func(s ScaleStep) string {
		if s.Report == nil || s.Report.Churn == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", s.ChangeP99Ms)
	},
	"svg": func(s string) template.HTML { return template.HTML(s) }, // drawn by results.ScaleChart, its labels escaped there
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>meshperf cpload scale: {{.Shape}} mesh</title>
{{.Style}}
</head>
<body>
<h1>meshperf cpload scale: {{.Shape}} mesh</h1>
<dl class="meta">
<dt>Sidecar scoping</dt><dd>{{.Scoping}}</dd>
<dt>Protocol</dt><dd>{{.Protocol}}</dd>
<dt>Control plane</dt><dd>{{.ControlPlane}}</dd>
<dt>Sizes</dt><dd>{{len .Steps}}</dd>
</dl>
<h2>Steps</h2>
<div class="scroll"><table id="scale-steps">
<thead><tr><th>size</th><th>proxies</th><th>services</th><th>all synced (s)</th><th>CPU (s)</th><th>connect CPU (s)</th><th>connect CPU per proxy (ms)</th><th>peak RSS (MB)</th><th>KB per proxy</th><th>KB per service</th><th>change P99 (ms)</th></tr></thead>
<tbody>
{{range .Steps}}<tr><td>{{.Multiple}}x</td><td>{{.Proxies}}</td><td>{{.Services}}</td><td>{{seconds .SyncedMs}}</td><td>{{f1 .CPUSeconds}}</td><td>{{f1 .ConnectCPUSeconds}}</td><td>{{f2 .ConnectCPUPerProxyMs}}</td><td>{{printf "%.0f" .PeakRSSMB}}</td><td>{{f1 .RSSPerProxyKB}}</td><td>{{f1 .RSSPerServiceKB}}</td><td>{{p99 .}}</td></tr>
{{end}}</tbody></table></div>
{{if gt (len .Steps) 1}}<p id="scale-growth">Growth with proxies, the exponent b of a&middot;proxies<sup>b</sup> fitted on the sizes (1 is linear): sync {{exponent .Growth.Sync}}, connect CPU {{exponent .Growth.ConnectCPU}}, peak RSS {{exponent .Growth.PeakRSS}}; connect CPU per proxy {{f2 .CostRatio}}x from the first size to the last.</p>{{end}}
<h2>Cost against proxies</h2>
<p>The control plane's figures, on log-log axes, where a power law is a straight line whose slope is its exponent. The dotted grey line is linear growth (the same cost per proxy) from the first size: flat for a figure per proxy. Figures not measured at a size are left out.</p>
<div class="charts">{{range .Charts}}<figure style="margin:0" data-kind="{{.Kind}}">{{svg .SVG}}</figure>{{end}}</div>
</body>
</html>
`))
