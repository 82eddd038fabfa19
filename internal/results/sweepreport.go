package results

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/meshperf/meshperf/internal/capacity"
)

// The report's part for a capacity sweep (meshperf lab sweep): first after
// the header, each mode's capacity under the objectives and what the mesh
// costs of it, the knees, the latency, CPU and memory curves, the sizing
// advice for the target rate, and each mode's steps with their verdicts.
// It stands in for the per-point charts: each mode ran at rates of its own,
// so a point of the matrix holds one mode's step, not a comparison.

// sweepSection is the sweep's part of the page.
type sweepSection struct {
	Objectives []string // as written, "p99=5ms"
	TargetRPS  int
	Baseline   string
	CPUs       int
	Capacity   []sweepCapacityRow
	LossNotes  []string
	KneeHeads  []string // "P50 knee", one per capacity.CurvePercentiles
	Knees      []sweepKneeRow
	Latency    []chart // one per capacity.CurvePercentiles
	LogLatency []chart
	Cost       []chart
	// GeneratorBound says some step is drawn hollow as generator-bound.
	GeneratorBound bool
	Advice         []capacity.Advice
	Steps          []sweepModeSteps
}

type sweepCapacityRow struct {
	Mode         string
	All          string
	PerObjective []string // one per sweepSection.Objectives
	Lost         string   // rps lost to the mesh, "baseline", or "-"
	LostPercent  string
	Stop         string
}

type sweepKneeRow struct {
	Mode  string
	Knees []string
}

type sweepModeSteps struct {
	Mode, Stop string
	Rows       []sweepStepRow
}

type sweepStepRow struct {
	Step                   capacity.Step
	P50, P90, P99, SendP99 float64
	Verdict, Detail, Class string
	// Generator is the load generator's vCPU and its cores, "1.950 of 2".
	Generator string
}

// newSweepSection lays out an analysis for the page and draws its charts.
func newSweepSection(a capacity.Analysis) (*sweepSection, error) {
	sec := &sweepSection{TargetRPS: a.TargetRPS, Baseline: a.Baseline, CPUs: a.CPUs, Advice: a.Advice}
	for _, o := range a.Objectives {
		sec.Objectives = append(sec.Objectives, o.String())
	}
	for _, pct := range capacity.CurvePercentiles {
		sec.KneeHeads = append(sec.KneeHeads, percentileName(pct)+" knee")
	}
	losses := map[string]capacity.Loss{}
	for _, l := range a.Losses {
		losses[l.Mode] = l
		if l.Note != "" {
			sec.LossNotes = append(sec.LossNotes, l.Mode+": "+l.Note)
		}
	}
	for _, c := range a.Curves {
		sec.Capacity = append(sec.Capacity, capacityRow(c, a, losses))
		sec.Knees = append(sec.Knees, kneeRow(c))
		sec.Steps = append(sec.Steps, stepRows(c))
		for i := range c.Steps {
			sec.GeneratorBound = sec.GeneratorBound || placeOf(c, i) == stepExcluded
		}
	}
	for _, pct := range capacity.CurvePercentiles {
		for _, logY := range []bool{false, true} {
			ch, ok, err := sweepLatencyChart(a, pct, logY)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if logY {
				sec.LogLatency = append(sec.LogLatency, ch)
			} else {
				sec.Latency = append(sec.Latency, ch)
			}
		}
	}
	for _, m := range []string{capacity.MetricVCPU, capacity.MetricMemMB} {
		ch, ok, err := sweepCostChart(a, m)
		if err != nil {
			return nil, err
		}
		if ok {
			sec.Cost = append(sec.Cost, ch)
		}
	}
	return sec, nil
}

func capacityRow(c capacity.Curve, a capacity.Analysis, losses map[string]capacity.Loss) sweepCapacityRow {
	row := sweepCapacityRow{Mode: c.Mode, All: c.Capacity.String(), Lost: "-", LostPercent: "-", Stop: c.StopReason}
	for i := range a.Objectives {
		cell := "-"
		if i < len(c.PerObjective) {
			cell = c.PerObjective[i].String()
		}
		row.PerObjective = append(row.PerObjective, cell)
	}
	if c.Mode == a.Baseline {
		row.Lost, row.LostPercent = "baseline", ""
	} else if l, ok := losses[c.Mode]; ok {
		about := ""
		if l.Approximate {
			about = "≈ "
		}
		row.Lost = about + rpsText(l.RPS)
		if drawable(l.Percent, false) {
			row.LostPercent = about + fmt.Sprintf("%.1f%%", l.Percent)
		}
	}
	return row
}

func kneeRow(c capacity.Curve) sweepKneeRow {
	row := sweepKneeRow{Mode: c.Mode}
	for _, pct := range capacity.CurvePercentiles {
		text := "-"
		for _, k := range c.Knees {
			if k.Percentile != pct {
				continue
			}
			if k.Found {
				text = fmt.Sprintf("at %s rps (%s ms)", rpsText(k.RPS), msLabel(k.MS))
			} else {
				text = "none: " + k.Why
			}
		}
		row.Knees = append(row.Knees, text)
	}
	return row
}

func stepRows(c capacity.Curve) sweepModeSteps {
	out := sweepModeSteps{Mode: c.Mode, Stop: c.StopReason}
	for i, st := range c.Steps {
		row := sweepStepRow{Step: st, P50: stepMS(st, 50), P90: stepMS(st, 90), P99: stepMS(st, 99),
			SendP99: st.Generator.SendDelayP99MS, Generator: f3(st.Generator.VCPU)}
		if cores := st.Generator.Cores; drawable(cores, false) && cores > 0 {
			row.Generator += fmt.Sprintf(" of %g", cores)
		}
		if i < len(c.Judgements) {
			j := c.Judgements[i]
			row.Verdict, row.Detail = string(j.Verdict), j.Detail
			if j.ServerBound {
				row.Detail = strings.TrimSpace(row.Detail + " (the app server at its CPU limit)")
			}
		}
		switch placeOf(c, i) {
		case stepLeftOut:
			row.Class = "failed"
			if st.FailureReason != "" && row.Detail == "" {
				row.Detail = st.FailureReason
			}
		case stepExcluded:
			row.Class = "excluded"
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// stepMS is a step's latency at percentile p, NaN (drawn as nothing,
// written "-") when it has none.
func stepMS(s capacity.Step, p float64) float64 {
	if ms, ok := s.At(p); ok {
		return ms
	}
	return math.NaN()
}

// percentileName is a percentile as the charts' titles write it, "P99".
func percentileName(p float64) string { return fmt.Sprintf("P%g", p) }

// percentileKey is a percentile in a chart's kind, "p99".
func percentileKey(p float64) string { return fmt.Sprintf("p%g", p) }

func rpsText(v float64) string {
	if !drawable(v, false) {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// The report's sweep part, which "body" executes with the page first.
var _ = template.Must(pageTemplate.New("sweep").Funcs(template.FuncMap{"rps": rpsText, "yesNo": yesNo, "margin": func() int { return capacity.MarginResidualSDs },
	"commas": func(v []string) string { return strings.Join(v, ", ") }}).Parse(`{{with .Sweep}}
<h2>Capacity</h2>
<p>{{if .Objectives}}Objectives: {{commas .Objectives}}{{else}}No latency objectives{{end}}{{if .TargetRPS}}; target rate {{.TargetRPS}} rps{{end}}{{with .Baseline}}; baseline {{.}}{{end}}{{with .CPUs}}; {{.}} CPUs{{end}}.</p>
<p>A mode's capacity is the highest rate it carried with every step up to it within the objectives; "≥" where the sweep stopped for another reason first. The capacity lost to the mesh is the baseline's minus the mode's, under all objectives together.</p>
<div class="scroll"><table id="sweep-capacity" class="sweep-capacity">
<thead><tr><th class="l">mode</th><th>capacity, all objectives</th>{{range .Objectives}}<th>{{.}}</th>{{end}}<th>lost to the mesh (rps)</th><th>lost (%)</th><th class="l">why the sweep stopped</th></tr></thead>
<tbody>
{{range .Capacity}}<tr><td class="l">{{.Mode}}</td><td>{{.All}}</td>{{range .PerObjective}}<td>{{.}}</td>{{end}}<td>{{.Lost}}</td><td>{{.LostPercent}}</td><td class="l" style="white-space:normal;min-width:16rem">{{.Stop}}</td></tr>
{{end}}</tbody></table></div>
{{if not .Capacity}}<p class="note">No mode was swept.</p>{{end}}
{{with .LossNotes}}<ul class="note">{{range .}}<li>≈ {{.}}</li>{{end}}</ul>{{end}}
<h3>Knees</h3>
<p>Where each percentile's latency curve bends; generator-bound steps are left out.</p>
<div class="scroll"><table id="sweep-knees" class="sweep-knees">
<thead><tr><th class="l">mode</th>{{range .KneeHeads}}<th class="l">{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Knees}}<tr><td class="l">{{.Mode}}</td>{{range .Knees}}<td class="l" style="white-space:normal;min-width:12rem">{{.}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
{{with .Latency}}<h3>Latency against rate</h3>
<div class="charts">{{range .}}<figure style="margin:0" data-kind="{{.Kind}}" data-series="{{join .Series}}">{{svg .SVG}}</figure>{{end}}</div>
<p class="note">Each step at the rate it actually carried. Diamonds are the knees; dashed red lines the objectives.{{if $.Sweep.GeneratorBound}} Hollow grey points are steps where the load generator, not the mesh, was the bottleneck: not joined, and left out of the knees and fits.{{end}}</p>
{{end}}{{with .LogLatency}}<details><summary>Latency on a log scale</summary>
<div class="charts">{{range .}}<figure style="margin:0" data-kind="{{.Kind}}" data-series="{{join .Series}}">{{svg .SVG}}</figure>{{end}}</div>
</details>
{{end}}{{with .Cost}}<h3>Proxy CPU and memory against rate</h3>
<div class="charts">{{range .}}<figure style="margin:0" data-kind="{{.Kind}}" data-series="{{join .Series}}">{{svg .SVG}}</figure>{{end}}</div>
<p class="note">One line per proxy ("MODE ROLE"); the thin straight line beside it is the least-squares fit the sizing advice is read from, with its R² in the legend.</p>
{{end}}{{if .TargetRPS}}<h2>Sizing advice</h2>
<p>For {{.TargetRPS}} rps{{if .Objectives}} under {{commas .Objectives}}{{end}}: what to reserve per proxy: the fitted use at the target plus the margin the measurements support ({{margin}} of the fit's residual standard deviations, about 95% of the steps' scatter), rounded up.</p>
<div class="scroll"><table id="sweep-advice" class="sweep-advice">
<thead><tr><th class="l">mode</th><th class="l">proxy</th><th>vCPU</th><th>margin (vCPU)</th><th>MB</th><th>margin (MB)</th><th class="l">extrapolated</th><th class="l">objectives met here</th><th class="l">evidence</th></tr></thead>
<tbody>
{{range .Advice}}<tr><td class="l">{{.Mode}}</td><td class="l">{{.Kind}}</td><td>{{f3 .VCPU}}</td><td>{{f3 .MarginVCPU}}</td><td>{{f1 .MemMB}}</td><td>{{f1 .MarginMB}}</td><td class="l">{{yesNo .Extrapolated}}</td><td class="l">{{yesNo .MetHere}}</td><td class="l" style="white-space:normal;min-width:20rem">{{.Evidence}}</td></tr>
{{else}}<tr><td class="l" colspan="9">No proxy to size: no mode with proxies had enough steps to fit.</td></tr>
{{end}}</tbody></table></div>
{{end}}<h3>Steps</h3>
{{range .Steps}}<details><summary>{{.Mode}}: {{len .Rows}} steps{{with .Stop}}; stopped: {{.}}{{end}}</summary>
<div class="scroll"><table class="sweep-steps" data-mode="{{.Mode}}">
<thead><tr><th>requested rps</th><th>actual rps</th><th>P50 (ms)</th><th>P90 (ms)</th><th>P99 (ms)</th><th>errors (%)</th><th>generator vCPU</th><th>send delay P99 (ms)</th><th class="l">verdict</th><th class="l">detail</th></tr></thead>
<tbody>
{{range .Rows}}<tr{{with .Class}} class="{{.}}"{{end}}><td>{{.Step.RequestedRPS}}{{if .Step.Refined}} <span class="note">refined</span>{{end}}{{if gt .Step.Repetitions 1}} <span class="note">median of {{.Step.Repetitions}}</span>{{end}}</td><td>{{rps .Step.ActualRPS}}</td><td>{{f3 .P50}}</td><td>{{f3 .P90}}</td><td>{{f3 .P99}}</td><td>{{pct .Step.ErrorPercent}}</td><td>{{.Generator}}</td><td>{{f3 .SendP99}}</td><td class="l">{{.Verdict}}</td><td class="l">{{.Detail}}</td></tr>
{{end}}</tbody></table></div>
</details>
{{end}}{{end}}`))

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
