package results

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
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

// comparisonCharts overlays the two sides of a row (OverlaidLatencyCharts).
func comparisonCharts(r ComparisonRow, sides [2]string) ([]chart, error) {
	var runs []OverlaidLatency
	for i, l := range r.Latency {
		if l != nil {
			runs = append(runs, OverlaidLatency{Name: sides[i], Latency: l})
		}
	}
	return OverlaidLatencyCharts(r.Heading, runs)
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
