package compare

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// WriteHTML writes the report as a standalone page: the lab report's
// style and charts, with a comparison section per row overlaying the two
// sides' latency.
func WriteHTML(w io.Writer, rep Report) error {
	page := results.Comparison{
		Title:   fmt.Sprintf("meshperf compare: %s against %s", rep.B.Selector, rep.A.Selector),
		Sides:   [2]string{"A: " + rep.A.Selector, "B: " + rep.B.Selector},
		Facts:   facts(rep),
		Notes:   rep.Notes,
		Method:  strings.ReplaceAll(Method(rep), "\n", " "),
		Columns: Columns(rep),
		Verdict: rep.Verdict,
	}
	for _, row := range rep.Rows {
		for _, m := range row.Metrics {
			page.Lines = append(page.Lines, results.ComparisonLine{Cells: Cells(row, m), Verdict: m.Verdict})
		}
		cr := results.ComparisonRow{Heading: row.Cell.String(), Verdict: row.Verdict}
		for i, l := range row.Latency {
			cr.Latency[i] = l.Drawn()
		}
		page.Rows = append(page.Rows, cr)
	}
	var only []string
	for _, c := range rep.OnlyInA {
		only = append(only, "only in A: "+c.String())
	}
	for _, c := range rep.OnlyInB {
		only = append(only, "only in B: "+c.String())
	}
	page.Footnote = strings.Join(only, "; ")
	return results.WriteComparisonHTML(w, page)
}

// facts are the sides' make-up and provenance, side by side: the table
// prints them too.
func facts(rep Report) []results.ComparisonFact {
	side := func(get func(SideSummary) string) results.ComparisonFact {
		return results.ComparisonFact{A: get(rep.A), B: get(rep.B)}
	}
	var out []results.ComparisonFact
	for _, f := range []struct {
		name string
		get  func(SideSummary) string
	}{
		{"selector", func(s SideSummary) string { return s.Selector }},
		{"runs", func(s SideSummary) string {
			return fmt.Sprintf("%s from %s, %d left out", plural(s.Runs, "run"), plural(len(s.Invocations), "invocation"), len(s.Excluded))
		}},
		{"invocations", func(s SideSummary) string { return strings.Join(s.Invocations, ", ") }},
		{"scenario", func(s SideSummary) string { return strings.Join(s.Scenarios, ", ") }},
		{"meshperf", provenanceOf(func(p results.Provenance) string { return p.Meshperf.String() })},
		{"data plane", provenanceOf(func(p results.Provenance) string { return p.DataPlane.Describe() })},
		{"control plane", provenanceOf(func(p results.Provenance) string { return p.ControlPlane.Describe() })},
		{"params hash", provenanceOf(func(p results.Provenance) string { return p.ParamsHash })},
		{"labels", provenanceOf(func(p results.Provenance) string { return p.Labels })},
		{"machine", provenanceOf(func(p results.Provenance) string { return p.Machine.String() })},
	} {
		fact := side(f.get)
		fact.Name = f.name
		out = append(out, fact)
	}
	return out
}

// provenanceOf is a side's distinct values of one provenance figure,
// joined; "unknown" when no run recorded it.
func provenanceOf(get func(results.Provenance) string) func(SideSummary) string {
	return func(s SideSummary) string {
		var vs []string
		for _, p := range s.Provenance {
			if v := get(p); v != "" && !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return "unknown"
		}
		return strings.Join(vs, "; ")
	}
}
