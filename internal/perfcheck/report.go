package perfcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchunit"

	"github.com/meshperf/meshperf/internal/results"
)

// Report is a perfcheck comparison: every group's rows and the counts.
type Report struct {
	Machine results.Machine `json:"machine"`
	// AcrossMachines has a line per baseline measured on another machine
	// than this one ("compared across machines: ..."); it is still
	// compared, and the reader told.
	AcrossMachines []string `json:"across_machines,omitempty"`
	Confidence     float64  `json:"confidence"`
	Threshold      float64  `json:"threshold"`
	Count          int      `json:"count,omitempty"`     // Go runs per benchmark
	Benchtime      string   `json:"benchtime,omitempty"` // Go -benchtime
	Groups         []Group  `json:"groups"`
	Summary        Counts   `json:"summary"`
}

// Group is the rows of one Go package or one Rust bench file.
type Group struct {
	Name           string `json:"name"` // pkg/histogram, proxy/benches/routing.rs
	Lang           string `json:"lang"` // go or rust
	Baseline       string `json:"baseline,omitempty"`
	BaselineDate   string `json:"baseline_date,omitempty"`
	BaselineCommit string `json:"baseline_commit,omitempty"`
	Rows           []Row  `json:"rows"`
}

// Counts are the rows by verdict.
type Counts struct {
	Compared int `json:"compared"` // worse + better + same
	Worse    int `json:"worse"`
	Better   int `json:"better"`
	Same     int `json:"same"`
	New      int `json:"new"`
	Gone     int `json:"gone"`
}

func (r *Report) count() {
	r.Summary = Counts{}
	for _, g := range r.Groups {
		for _, row := range g.Rows {
			switch row.Verdict {
			case Worse:
				r.Summary.Worse++
			case Better:
				r.Summary.Better++
			case Same:
				r.Summary.Same++
			case New:
				r.Summary.New++
			case Gone:
				r.Summary.Gone++
			}
		}
	}
	r.Summary.Compared = r.Summary.Worse + r.Summary.Better + r.Summary.Same
}

// Failed reports whether any benchmark got significantly worse beyond the
// threshold: perfcheck's exit status 1.
func (r *Report) Failed() bool { return r.Summary.Worse > 0 }

// WorseLines names each worse row, "pkg/histogram Record sec/op +25.1%".
func (r *Report) WorseLines() []string {
	var lines []string
	for _, g := range r.Groups {
		for _, row := range g.Rows {
			if row.Verdict == Worse {
				lines = append(lines, fmt.Sprintf("%s %s %s %s", g.Name, row.Name, row.Unit, formatChange(row.Change)))
			}
		}
	}
	return lines
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as benchstat does, a table per group: each
// benchmark and unit with the baseline's and the new median and their
// confidence intervals, the change (~ when not significant), the test, and
// the verdict; then the summary line.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	for _, line := range r.AcrossMachines {
		b.WriteString(line + "\n")
	}
	for _, g := range r.Groups {
		b.WriteString("\n" + g.Name)
		switch {
		case g.Baseline == "":
			b.WriteString("  (no baseline: every benchmark is new)")
		default:
			parts := []string{"baseline " + g.Baseline}
			if g.BaselineDate != "" {
				parts = append(parts, g.BaselineDate)
			}
			if g.BaselineCommit != "" {
				parts = append(parts, "commit "+g.BaselineCommit)
			}
			fmt.Fprintf(&b, "  (%s)", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  benchmark\tunit\tbaseline\tnew\tchange\ttest\tverdict")
		for _, row := range g.Rows {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Name, row.Unit,
				formatEstimate(row.Baseline, row.Unit), formatEstimate(row.New, row.Unit),
				changeColumn(row), testColumn(row), row.Verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString("\n" + r.SummaryLine() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// SummaryLine is the report's last line: the counts and what "worse" meant.
func (r *Report) SummaryLine() string {
	c := r.Summary
	return fmt.Sprintf("perfcheck: %d compared: %d worse, %d better, %d same; %d new, %d gone (worse: a significant change at %s confidence of more than %s)",
		c.Compared, c.Worse, c.Better, c.Same, c.New, c.Gone, formatPercent(r.Confidence), formatPercent(r.Threshold))
}

func formatPercent(f float64) string {
	return fmt.Sprintf("%s%%", strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f*100), "0"), "."))
}

// formatEstimate is "5.240n ± 2%", in benchstat's units; "-" for none.
func formatEstimate(e *Estimate, unit string) string {
	if e == nil {
		return "-"
	}
	v := benchunit.Scale(e.Median, benchunit.ClassOf(unit))
	switch {
	case math.IsInf(e.Lo, 0) || math.IsInf(e.Hi, 0):
		return v + " ± ∞"
	case e.Median == 0:
		return v + " ± 0%"
	}
	spread := max(e.Hi-e.Median, e.Median-e.Lo) / e.Median * 100
	return fmt.Sprintf("%s ± %.0f%%", v, spread)
}

func formatChange(c float64) string {
	if math.IsInf(c, 1) {
		return "+inf%"
	}
	return fmt.Sprintf("%+.1f%%", c*100)
}

// changeColumn is the change, or "~" when it is not significant, as
// benchstat writes it.
func changeColumn(row Row) string {
	switch {
	case row.Verdict == New || row.Verdict == Gone:
		return ""
	case !row.Significant:
		return "~"
	}
	return formatChange(row.Change)
}

// testColumn says what decided significance: the U test's p-value and the
// runs (Go), or criterion's confidence interval of the change (Rust).
func testColumn(row Row) string {
	switch {
	case row.Verdict == New || row.Verdict == Gone:
		return ""
	case !math.IsNaN(row.P):
		return fmt.Sprintf("p=%.3f n=%d+%d", row.P, row.Baseline.N, row.New.N)
	}
	return fmt.Sprintf("CI %s..%s", formatChange(row.ChangeLo), formatChange(row.ChangeHi))
}
