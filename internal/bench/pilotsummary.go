package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// summarize takes each subject's medians and, with istiod, the ratios.
func (r *PilotResult) summarize(subjects []string) {
	by := map[string]PilotSummary{}
	samples := map[string]map[string]Samples{}
	for _, s := range subjects {
		sum := PilotSummary{Subject: s}
		f := map[string]Samples{}
		for _, run := range r.Runs {
			if run.Subject != s {
				continue
			}
			f["p50"] = append(f["p50"], orNaN(run.E2E.N, run.E2E.P50))
			f["p90"] = append(f["p90"], orNaN(run.E2E.N, run.E2E.P90))
			f["p99"] = append(f["p99"], orNaN(run.E2E.N, run.E2E.P99))
			f["max"] = append(f["max"], orNaN(run.E2E.N, run.E2E.Max))
			f["watch"] = append(f["watch"], run.Stages.Watch)
			f["debounce"] = append(f["debounce"], run.Stages.Debounce)
			f["push"] = append(f["push"], run.Stages.Push)
			f["send"] = append(f["send"], run.Stages.Send)
			f["total"] = append(f["total"], run.Stages.Total)
			f["cpu"] = append(f["cpu"], run.CPU)
			f["rss"] = append(f["rss"], run.RSSMB)
			sum.Missed += run.Missed
			sum.Stages.Deliveries += run.Stages.Deliveries
			sum.Stages.Source = run.Stages.Source
		}
		sum.P50, sum.P90, sum.P99, sum.Max = f["p50"].Median(), f["p90"].Median(), f["p99"].Median(), f["max"].Median()
		sum.P50CV, sum.P99CV = f["p50"].CV(), f["p99"].CV()
		sum.Stages.Watch, sum.Stages.Debounce = f["watch"].Median(), f["debounce"].Median()
		sum.Stages.Push, sum.Stages.Send, sum.Stages.Total = f["push"].Median(), f["send"].Median(), f["total"].Median()
		sum.CPU, sum.RSSMB = f["cpu"].Median(), f["rss"].Median()
		by[s], samples[s] = sum, f
		r.Summaries = append(r.Summaries, sum)
	}
	ours, peer := samples[SubjectPilot], samples[SubjectIstiod]
	if peer == nil {
		return
	}
	key := fmt.Sprintf("file-to-cds %d clients ", r.Config.Clients)
	r.Ratios = []Ratio{
		NewRatio(key+"e2e-p50", ours["p50"], peer["p50"], false, PilotMedianGoal),
		NewRatio(key+"e2e-p90", ours["p90"], peer["p90"], false, 0),
		NewRatio(key+"e2e-p99", ours["p99"], peer["p99"], false, PilotP99Goal),
		NewRatio(key+"e2e-max", ours["max"], peer["max"], false, 0),
		NewRatio(key+"cpu", ours["cpu"], peer["cpu"], false, 0),
	}
}

func orNaN(n int, v float64) float64 {
	if n == 0 {
		return math.NaN()
	}
	return v
}

// PrintPilot writes the readable table: each subject's medians, its
// stages, and the ratios with their goals.
func PrintPilot(w io.Writer, r *PilotResult) {
	c := r.Config
	fmt.Fprintf(w, "file change -> CDS at %d clients: %d changes %v apart, %d repeats, PILOT_DEBOUNCE_AFTER=%v PILOT_DEBOUNCE_MAX=%v (medians of the repeats, ms)\n",
		c.Clients, c.Changes, c.Spacing, c.Repeats, c.DebounceAfter, c.DebounceMax)
	fmt.Fprintf(w, "  %-15s %8s %8s %8s %8s %7s   %8s %8s %8s %8s  %7s %7s\n",
		"subject", "P50", "P90", "P99", "max", "missed", "watch", "debounce", "push", "send", "cpu s", "rss MB")
	for _, s := range r.Summaries {
		noisy := ""
		if s.P50CV > NoisyCV || s.P99CV > NoisyCV {
			noisy = fmt.Sprintf("  (noisy: CV P50 %.0f%%, P99 %.0f%%)", 100*orZero(s.P50CV), 100*orZero(s.P99CV))
		}
		fmt.Fprintf(w, "  %-15s %8s %8s %8s %8s %7d   %8s %8s %8s %8s  %7s %7s%s\n", s.Subject,
			fmtMs(s.P50), fmtMs(s.P90), fmtMs(s.P99), fmtMs(s.Max), s.Missed,
			fmtMs(s.Stages.Watch), fmtMs(s.Stages.Debounce), fmtMs(s.Stages.Push), fmtMs(s.Stages.Send),
			fmtNum(s.CPU, 2), fmtNum(s.RSSMB, 1), noisy)
	}
	for _, s := range r.Summaries {
		fmt.Fprintf(w, "  stages of %s: %s\n", s.Subject, s.Stages.Source)
	}
	if len(r.Ratios) == 0 {
		fmt.Fprintln(w, "  no ratios: give -istiod PATH to measure istiod beside it")
		return
	}
	fmt.Fprintln(w, "ours / istiod:")
	for _, ratio := range r.Ratios {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimPrefix(ratio.Key, ""), ratio)
	}
}

func fmtMs(v float64) string { return fmtNum(v, 1) }

func fmtNum(v float64, decimals int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}
