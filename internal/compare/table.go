package compare

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/results"
)

// WriteTable prints the report as benchstat prints its comparisons: what
// each side is, then one aligned line per row and metric with both sides'
// repetitions, the difference and its interval, and the verdict.
func WriteTable(w io.Writer, rep Report) error {
	// Written whole at the end: one error to check, not one per line.
	ew := &bytes.Buffer{}
	for _, n := range rep.Notes {
		fmt.Fprintln(ew, "note:", n)
	}
	writeSides(ew, rep)
	fmt.Fprintf(ew, "%s\n\n", Method(rep))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(Columns(rep), "\t"))
	for _, row := range rep.Rows {
		for _, m := range row.Metrics {
			fmt.Fprintln(tw, strings.Join(Cells(row, m), "\t"))
		}
	}
	tw.Flush()
	if len(rep.Rows) == 0 {
		fmt.Fprintln(ew, "no cell (mode, protocol, qps, connections, payload) was measured on both sides")
	}
	for _, only := range []struct {
		side  string
		cells []Cell
	}{{"A", rep.OnlyInA}, {"B", rep.OnlyInB}} {
		for _, c := range only.cells {
			fmt.Fprintf(ew, "only in %s: %s\n", only.side, c)
		}
	}
	fmt.Fprintf(ew, "verdict: %s%s\n", rep.Verdict, verdictCounts(rep))
	_, err := ew.WriteTo(w)
	return err
}

// Columns are the table's header, Cells a line of it: the same in the
// text table and on the HTML page.
func Columns(rep Report) []string {
	return []string{"proto", "conn", "qps", "payload", "mode", "metric", "A n", "A median", "A mean", "B n", "B median", "B mean",
		"B-A", "B-A %", pctText(rep.Confidence*100) + " CI", "hist A", "hist B", "verdict"}
}

func Cells(row Row, m Metric) []string {
	histA, histB := "-", "-"
	if h := m.Histogram; h != nil {
		histA, histB = estimateText(h[0], m.Unit), estimateText(h[1], m.Unit)
	}
	return []string{row.Protocol, fmt.Sprint(row.Connections), results.QPSText(row.RequestedQPS), fmt.Sprint(row.PayloadBytes), row.Mode, m.Name,
		fmt.Sprint(m.A.N), num(m.A.Median, m.Unit), num(m.A.Mean, m.Unit), fmt.Sprint(m.B.N), num(m.B.Median, m.Unit), num(m.B.Mean, m.Unit),
		signed(m.Diff, m.Unit), signedPct(m.DiffPct), intervalText(m.CI, m.Unit), histA, histB, m.Verdict}
}

// Method says how the figures were made, for the table and the page.
func Method(rep Report) string {
	conf := pctText(rep.Confidence * 100)
	thr := pctText(rep.ThresholdPct)
	return fmt.Sprintf("B-A: mean(B) - mean(A) over the repetitions, with Welch's %s interval; worse when the whole interval\n"+
		"lies above +%s of A, better when below -%s (higher is worse for every metric). hist: the percentile of\n"+
		"each side's pooled calls with a distribution-free %s interval (sampling within runs only; not used for the verdict).",
		conf, thr, thr, conf)
}

// writeSides says what each side is made of and where it ran, side by
// side, then the runs left out.
func writeSides(w io.Writer, rep Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range facts(rep) {
		if f.Name == "selector" {
			f.Name, f.A, f.B = "", "A: "+f.A, "B: "+f.B
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, f.A, f.B)
	}
	tw.Flush()
	for _, s := range []struct {
		name string
		sum  SideSummary
	}{{"A", rep.A}, {"B", rep.B}} {
		if n := len(s.sum.Excluded); n > 0 {
			fmt.Fprintf(w, "left out of %s (failed, or more than %d%% errors): %s\n", s.name, results.MaxErrorPercent, plural(n, "run"))
			writeExcluded(w, s.sum.Excluded)
		}
	}
}

// verdictCounts is ", 2 of 12 rows worse, 1 better" for the last line.
func verdictCounts(rep Report) string {
	count := map[string]int{}
	for _, r := range rep.Rows {
		count[r.Verdict]++
	}
	var parts []string
	for _, v := range []string{VerdictWorse, VerdictBetter, VerdictTooFew} {
		if count[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[v], v))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf(" (%s: no significant change)", plural(len(rep.Rows), "row"))
	}
	return fmt.Sprintf(" (%s: %s)", plural(len(rep.Rows), "row"), strings.Join(parts, ", "))
}

// decimals is how a unit's figures are written: milliseconds to the
// microsecond, as the lab's summary does.
func decimals(unit string) int {
	if unit == "MB" {
		return 1
	}
	return 3
}

func num(v Number, unit string) string {
	if v.IsNaN() {
		return "-"
	}
	return fmt.Sprintf("%.*f", decimals(unit), float64(v))
}

func signed(v Number, unit string) string {
	if v.IsNaN() {
		return "-"
	}
	return fmt.Sprintf("%+.*f", decimals(unit), float64(v))
}

func signedPct(v Number) string {
	if v.IsNaN() {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", float64(v))
}

func intervalText(i Interval, unit string) string {
	if i.Lo.IsNaN() || i.Hi.IsNaN() {
		return "-"
	}
	return fmt.Sprintf("[%s, %s]", signed(i.Lo, unit), signed(i.Hi, unit))
}

func estimateText(e PercentileEstimate, unit string) string {
	return fmt.Sprintf("%s [%s, %s]", num(e.Value, unit), num(e.CI.Lo, unit), num(e.CI.Hi, unit))
}

// pctText writes a percentage without trailing zeros: 95%, 99.9%.
func pctText(v float64) string {
	return fmt.Sprintf("%s%%", strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), "."))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writeExcluded lists the runs left out, one line per reason: a lab that
// could not recover leaves dozens of runs with the same one.
func writeExcluded(w io.Writer, excluded []Excluded) {
	var reasons []string
	labels := map[string][]string{}
	for _, e := range excluded {
		if _, ok := labels[e.Reason]; !ok {
			reasons = append(reasons, e.Reason)
		}
		labels[e.Reason] = append(labels[e.Reason], e.Label)
	}
	for _, r := range reasons {
		if l := labels[r]; len(l) == 1 {
			fmt.Fprintf(w, "  %s: %s\n", l[0], r)
		} else {
			fmt.Fprintf(w, "  %s (%s and %d more): %s\n", plural(len(l), "run"), l[0], len(l)-1, r)
		}
	}
}
