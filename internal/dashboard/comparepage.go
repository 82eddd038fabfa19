package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/results"
)

// comparePageParams: the runs page's checkboxes submit run=A&run=B...;
// threshold and confidence are /api/compare's.
var comparePageParams = []string{"run", "threshold", "confidence"}

// comparePage is what the compare page shows: the picked runs overlaid per
// cell they share, and meshperf compare's table of each run against the
// first (the baseline). With fewer than two runs picked, only the form.
type comparePage struct {
	Runs                  []string // the selectors picked, the baseline first
	Choices               []string // the stored run ids, newest first, for the form
	Threshold, Confidence string   // as given, for the form
	Cells                 []comparedCell
	Reports               []comparedReport
}

// comparedCell is one cell (mode, protocol, rate, connections, payload)
// every picked run measured, with its overlaid charts.
type comparedCell struct {
	Heading string
	Charts  []results.Chart
}

// comparedReport is compare's report of one run against the baseline.
type comparedReport struct {
	Baseline, Run string
	Verdict       string
	VerdictClass  string
	Notes         []string
	Columns       []string // compare's, after the cell's
	Rows          []verdictRow
	Only          []string // cells measured on one side only
	Method        string
}

// verdictRow is a cell's lines of compare's table under one heading (the
// cell), so that the table fits a laptop's screen.
type verdictRow struct {
	Heading, Verdict, Class string
	Lines                   []verdictLine
}

// verdictLine is a line of compare's table: its cells after the cell's, up
// to the verdict, the verdict, and Class to colour it.
type verdictLine struct {
	Cells          []string
	Verdict, Class string
}

// cellColumns are the columns compare's table begins with that name the
// cell (proto, conn, qps, payload, mode): the page writes them once per
// cell, as its heading.
const cellColumns = 5

func (s *server) comparePage(r *http.Request) (view, error) {
	q := r.URL.Query()
	opt, err := compareOptions(q)
	if err != nil {
		return view{}, err
	}
	// The form's optional selects submit "" when left alone.
	picked := slices.DeleteFunc(slices.Clone(q["run"]), func(sel string) bool { return sel == "" })
	p := comparePage{Runs: picked, Threshold: q.Get("threshold"), Confidence: q.Get("confidence")}
	if len(picked) < 2 {
		invocations, err := s.listInvocations(url.Values{})
		if err != nil {
			return view{}, err
		}
		for _, inv := range invocations {
			p.Choices = append(p.Choices, inv.RunID)
		}
		return view{title: "Compare runs", section: sectionCompare, data: p}, nil
	}
	sides := make([]compare.Side, len(picked))
	for i, sel := range picked {
		if sides[i], err = s.compareSide(sel, "run "+sel); err != nil {
			return view{}, err
		}
	}
	var reports []compare.Report
	for _, side := range sides[1:] {
		rep := compare.Compare(sides[0], side, opt)
		reports = append(reports, rep)
		p.Reports = append(p.Reports, reportView(rep))
	}
	if p.Cells, err = overlaidCells(picked, reports); err != nil {
		return view{}, err
	}
	return view{title: "Compare " + fmt.Sprint(len(picked)) + " runs", section: sectionCompare, data: p}, nil
}

// reportView is compare's report as the page's table: the text table's
// columns and cells, with each verdict's class.
func reportView(rep compare.Report) comparedReport {
	v := comparedReport{Baseline: rep.A.Selector, Run: rep.B.Selector, Verdict: rep.Verdict, VerdictClass: verdictClass(rep.Verdict),
		Notes: rep.Notes, Columns: compare.Columns(rep)[cellColumns:], Method: compare.Method(rep)}
	v.Columns = v.Columns[:len(v.Columns)-1] // the verdict has its own cell
	for _, row := range rep.Rows {
		vr := verdictRow{Heading: row.Cell.String(), Verdict: row.Verdict, Class: verdictClass(row.Verdict)}
		for _, m := range row.Metrics {
			cells := compare.Cells(row, m) // the verdict is the last column
			vr.Lines = append(vr.Lines, verdictLine{Cells: cells[cellColumns : len(cells)-1], Verdict: m.Verdict, Class: verdictClass(m.Verdict)})
		}
		v.Rows = append(v.Rows, vr)
	}
	for _, c := range rep.OnlyInA {
		v.Only = append(v.Only, "only in "+rep.A.Selector+": "+c.String())
	}
	for _, c := range rep.OnlyInB {
		v.Only = append(v.Only, "only in "+rep.B.Selector+": "+c.String())
	}
	return v
}

// verdictClass is the style sheet's class for a verdict: worse and better
// stand out, the rest do not.
func verdictClass(verdict string) string {
	switch verdict {
	case compare.VerdictWorse:
		return "worse"
	case compare.VerdictBetter:
		return "better"
	}
	return "same"
}

// overlaidCells draws, for each cell that every picked run measured, the
// runs' latency on shared axes: the baseline's distribution from the first
// report's side A, each other run's from its report's side B (compare
// pools each side's repetitions).
func overlaidCells(picked []string, reports []compare.Report) ([]comparedCell, error) {
	var out []comparedCell
	for _, first := range reports[0].Rows {
		runs := []results.OverlaidLatency{{Name: picked[0] + " (baseline)", Latency: first.Latency[0].Drawn()}}
		for i, rep := range reports {
			at := slices.IndexFunc(rep.Rows, func(r compare.Row) bool { return r.Cell == first.Cell })
			if at < 0 {
				runs = nil
				break
			}
			runs = append(runs, results.OverlaidLatency{Name: picked[i+1], Latency: rep.Rows[at].Latency[1].Drawn()})
		}
		if runs == nil {
			continue
		}
		// The section's heading names the whole cell; the charts' titles,
		// which must fit their width, name the mode.
		charts, err := results.OverlaidLatencyCharts(first.Mode, runs)
		if err != nil {
			return nil, err
		}
		out = append(out, comparedCell{Heading: first.Cell.String(), Charts: charts})
	}
	return out, nil
}
