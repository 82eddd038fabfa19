package capacity

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the sweep's report for a terminal: per mode its steps,
// knees and proxy fits; then the capacities with what each mode loses
// against the baseline, and the sizing advice with its evidence.
func (a Analysis) WriteText(w io.Writer) error {
	p := &printer{w: w}
	if len(a.Objectives) > 0 {
		p.linef("Capacity sweep within %s", a.Objectives)
	} else {
		p.linef("Capacity sweep without objectives: a mode's capacity is the highest rate it kept without errors")
	}
	for _, c := range a.Curves {
		p.linef("")
		writeCurve(p, c)
	}
	if len(a.Curves) > 0 {
		p.linef("")
		writeCapacities(p, a)
	}
	if a.TargetRPS > 0 {
		p.linef("")
		writeAdvice(p, a)
	}
	return p.err
}

// printer keeps the first write error so the report reads as a sequence
// of lines rather than of error checks.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) linef(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

// table writes rows aligned in columns, two spaces apart.
func (p *printer) table(rows [][]string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		p.linef("%s", strings.TrimRight(line, " "))
	}
}

func writeCurve(p *printer, c Curve) {
	if c.StopReason == "" {
		p.linef("%s", c.Mode)
	} else {
		p.linef("%s — %s", c.Mode, c.StopReason)
	}
	if len(c.Steps) == 0 {
		p.linef("  no steps measured")
		return
	}
	rows := [][]string{{"rps", "actual", "p50 ms", "p90 ms", "p99 ms", "errors %", "verdict"}}
	for i, s := range c.Steps {
		asked := fmt.Sprint(s.RequestedRPS)
		if s.Refined {
			asked += "*"
		}
		verdict := string(c.Judgements[i].Verdict)
		if c.Judgements[i].ServerBound {
			verdict += ", server CPU saturated"
		}
		rows = append(rows, []string{asked, formatFigure(s.ActualRPS),
			latencyCell(s, 50), latencyCell(s, 90), latencyCell(s, 99),
			formatFigure(s.ErrorPercent), verdict})
	}
	p.table(rows)
	if n := c.Steps[0].Repetitions; n > 1 {
		p.linef("  each step the median of %d runs", n)
	}
	// The details go below the table: beside it they would push a line
	// past a terminal's width.
	for i, s := range c.Steps {
		if d := c.Judgements[i].Detail; d != "" {
			p.wrapped("  ", fmt.Sprintf("at %d rps: %s", s.RequestedRPS, d))
		}
	}
	for _, k := range c.Knees {
		if k.Found {
			p.linef("  knee p%s: %s rps (%s ms)", formatPercentile(k.Percentile), formatFigure(k.RPS), formatFigure(k.MS))
		} else {
			p.linef("  knee p%s: none, %s", formatPercentile(k.Percentile), k.Why)
		}
	}
	for _, f := range c.Fits {
		p.linef("  %s", fitLineText(f))
	}
}

func latencyCell(s Step, p float64) string {
	if ms, ok := s.At(p); ok {
		return formatFigure(ms)
	}
	return "-"
}

// fitLineText writes a fit per 1000 rps, the scale rates are read at:
// "client-sidecar vCPU = 0.02 + 0.31 per 1000 rps (R² 0.98, 6 steps)".
func fitLineText(f Fit) string {
	name, unit := "vCPU", ""
	if f.Metric == MetricMemMB {
		name, unit = "memory", " MiB"
	}
	r2 := "flat"
	if f.R2 == f.R2 {
		r2 = fmt.Sprintf("R² %.2f", f.R2)
	}
	return fmt.Sprintf("%s %s = %s + %s%s per 1000 rps (%s, %d steps, %s–%s rps)",
		f.Role, name, formatFigure(f.Intercept), formatFigure(1000*f.Slope), unit, r2, f.Points,
		formatFigure(f.MinRPS), formatFigure(f.MaxRPS))
}

func writeCapacities(p *printer, a Analysis) {
	title := "Capacity within every objective"
	if len(a.Objectives) == 0 {
		title = "Capacity (the highest rate kept without errors)"
	}
	p.linef("%s", title)
	header := []string{"mode", "capacity"}
	for _, o := range a.Objectives {
		header = append(header, o.String())
	}
	// The loss column only where a baseline was swept: a single target
	// (meshperf load's sweep) has nothing to lose against.
	withLoss := a.Baseline != "" && a.hasCurve(a.Baseline)
	if withLoss {
		header = append(header, "lost vs "+a.Baseline)
	}
	rows := [][]string{header}
	for _, c := range a.Curves {
		row := []string{c.Mode, c.Capacity.String()}
		for _, pc := range c.PerObjective {
			row = append(row, pc.String())
		}
		if withLoss {
			row = append(row, lossCell(a, c.Mode))
		}
		rows = append(rows, row)
	}
	p.table(rows)
	for _, l := range a.Losses {
		if l.Note != "" {
			p.wrapped("  ", l.Mode+": "+l.Note)
		}
	}
}

// String is the capacity as the terminal and the HTML report write it:
// "3200 rps", "≥ 1000 rps" (a lower bound), "not met at 500 rps",
// "unknown".
func (c Capacity) String() string {
	switch {
	case c.NotMet && c.NextRPS > 0:
		return fmt.Sprintf("not met at %d rps", c.NextRPS)
	case c.NotMet:
		return "not met"
	case c.LowerBound && c.RPS == 0:
		return "unknown"
	case c.LowerBound:
		return "≥ " + formatFigure(c.RPS) + " rps"
	}
	return formatFigure(c.RPS) + " rps"
}

func lossCell(a Analysis, mode string) string {
	for _, l := range a.Losses {
		if l.Mode == mode {
			approx := ""
			if l.Approximate {
				approx = "~"
			}
			return fmt.Sprintf("%s%s rps (%s%.0f%%)", approx, formatFigure(l.RPS), approx, l.Percent)
		}
	}
	return "-"
}

func writeAdvice(p *printer, a Analysis) {
	p.linef("Sizing for %d rps, per proxy (fit + %d residual SD, about 95%% of steps)", a.TargetRPS, MarginResidualSDs)
	if len(a.Advice) == 0 {
		p.linef("  no mode measured proxies to size")
		return
	}
	for _, adv := range a.Advice {
		var notes []string
		if adv.Extrapolated {
			notes = append(notes, "extrapolated")
		}
		if !adv.MetHere {
			notes = append(notes, "not met here")
		}
		note := ""
		if len(notes) > 0 {
			note = " [" + strings.Join(notes, ", ") + "]"
		}
		p.linef("  %s %s: %s vCPU, %s MiB%s", adv.Mode, adv.Kind,
			adviceFigure(adv.VCPU, "%.2f"), adviceFigure(adv.MemMB, "%.0f"), note)
		p.wrapped("    ", adv.Evidence)
	}
}

func adviceFigure(v float64, format string) string {
	if !finite(v) {
		return "?"
	}
	return fmt.Sprintf(format, v)
}

// reportWidth is the terminal width the report keeps within.
const reportWidth = 100

// wrapped writes text in lines of at most reportWidth columns, each
// starting with indent, later ones indented two more.
func (p *printer) wrapped(indent, text string) {
	for i, line := range wrap(text, reportWidth-len(indent)-2) {
		if i == 0 {
			p.linef("%s%s", indent, line)
		} else {
			p.linef("%s  %s", indent, line)
		}
	}
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// hasCurve says whether mode was swept.
func (a Analysis) hasCurve(mode string) bool {
	for _, c := range a.Curves {
		if c.Mode == mode {
			return true
		}
	}
	return false
}
