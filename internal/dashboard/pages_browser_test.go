package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/internal/testenv"
)

func TestComparePageOverlaysTheRuns(t *testing.T) {
	srv := regressionSeries(t)
	ctx := testenv.NewBrowser(t)
	// Picked on the runs page, as a user does: three runs' checkboxes.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("runs"))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run01", "run05", "run06"} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`input[name=run][value=`+id+`]`))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Submit(chromedp.ID("pick"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, waitFor(`document.querySelector("section.report") !== null`)); err != nil {
		t.Fatal(err)
	}
	// The runs page lists newest first, so the baseline is the newest picked.
	const base, others = "run06 (baseline)", "run05,run01"
	for _, cell := range []string{"no-mesh", "both-sidecars"} {
		sel := `section.cell[data-cell^="` + cell + ` "] figure[data-kind=compare-distribution]`
		if got := strings.Join(textsOf(t, ctx, sel+` li.series`), ","); got != base+","+others {
			t.Errorf("%s distribution's legend = %q, want %s,%s", cell, got, base, others)
		}
		// The SVG itself names each run in its legend: three series drawn.
		legend := textsOf(t, ctx, sel+` svg text`)
		for _, name := range append([]string{base}, strings.Split(others, ",")...) {
			if !containsText(legend, name) {
				t.Errorf("%s distribution's SVG has no legend entry %q (texts %q)", cell, name, legend)
			}
		}
		if n := countOf(t, ctx, `section.cell[data-cell^="`+cell+` "] figure[data-kind=compare-spectrum] li.series`); n != 3 {
			t.Errorf("%s spectrum chart has %d series, want 3", cell, n)
		}
	}
	// compare's table per run against the baseline, verdicts coloured:
	// run01 and run05 have the old level, better than run06's; no-mesh did
	// not change, so the run's verdict (its worst row's) is "~".
	if got := strings.Join(textsOf(t, ctx, "section.report h3"), " | "); got != "run05 against run06 (baseline): ~ | run01 against run06 (baseline): ~" {
		t.Errorf("report headings = %q", got)
	}
	metrics := textsOf(t, ctx, `section.report[data-run=run05] tr.v-better td:first-child`)
	if !containsText(metrics, "P99") || !containsText(metrics, "+P99") {
		t.Errorf("run05's better metrics = %q, want P99 and +P99 among them", metrics)
	}
	if n := countOf(t, ctx, `section.report td.verdict.better`); n == 0 {
		t.Errorf("no verdict cell is coloured .better")
	}
	verdicts := textsOf(t, ctx, `section.report[data-run=run05] tbody tr`)
	if len(verdicts) < 6 {
		t.Errorf("run05's table has %d lines, want the metrics of both modes", len(verdicts))
	}
	maybeScreenshot(t, ctx, "dashboard-compare")
}

func TestTrendsPageMarksTheChangePoint(t *testing.T) {
	srv := regressionSeries(t)
	ctx := testenv.NewBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/trends?scenario=quick"), chromedp.WaitVisible(chromedp.ID("panel-p99"))); err != nil {
		t.Fatal(err)
	}
	marks := textsOf(t, ctx, "#panel-p99 li.changepoint .label")
	if len(marks) != 1 || !strings.HasSuffix(marks[0], "% regression") || !strings.HasPrefix(marks[0], "+4") && !strings.HasPrefix(marks[0], "+5") {
		t.Fatalf("p99 change points = %q, want one regression of about +50%%", marks)
	}
	attrs, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const e = document.querySelector("#cp-p99-0");
		return {index: e.dataset.index, before: e.dataset.before, after: e.dataset.after,
			runBefore: e.querySelector("a.before").getAttribute("href"), runAfter: e.querySelector("a.after").getAttribute("href"),
			compare: e.querySelector("a.compare").getAttribute("href")}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"index": "5", "before": "1.0.4", "after": "1.0.5", "runBefore": "/runs/run05", "runAfter": "/runs/run06",
		"compare": "/compare?run=run05&run=run06"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("change point's %s = %q, want %q", k, attrs[k], v)
		}
	}
	// The chart marks it too, with the same label, and draws the versions.
	texts := textsOf(t, ctx, "#panel-p99 svg text")
	if !containsText(texts, marks[0]) || !containsText(texts, "1.0.0") || !containsText(texts, "1.0.9") {
		t.Errorf("p99 chart's texts %q lack the marker %q or the versions", texts, marks[0])
	}
	// Level series have no marker: the sidecars' memory did not change.
	if n := countOf(t, ctx, "#panel-mem li.changepoint"); n != 0 {
		t.Errorf("mem has %d change points, want none", n)
	}
	maybeScreenshot(t, ctx, "dashboard-trends")

	// The metric select reloads the page with that panel alone, as a
	// user's choice does (its change event submits the form).
	if _, err := chromedp.RunResponse(ctx, choose(`select[name=metric]`, "p50")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, waitFor(`location.search.includes("metric=p50")`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(textsOf(t, ctx, "figure.panel > figcaption"), ""); countOf(t, ctx, "figure.panel") != 1 || !strings.HasPrefix(got, "p50") {
		t.Errorf("with metric=p50 the panels are %q, want p50's alone", got)
	}
	// The change point's compare link opens the two runs compared.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/trends?scenario=quick&metric=p99"), chromedp.WaitVisible(chromedp.ID("cp-p99-0"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("#cp-p99-0 a.compare"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, waitFor(`document.querySelector("section.report") !== null`)); err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, ctx, "section.report h3"); len(got) != 1 || got[0] != "run06 against run05 (baseline): worse" {
		t.Errorf("the change point's comparison says %q, want run06 worse than run05", got)
	}
}

// choose picks value in the select as a user does, firing its change
// event.
func choose(selector, value string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](`(() => { const s = document.querySelector(`+quoteJS(selector)+`);
			s.value = `+quoteJS(value)+`; s.dispatchEvent(new Event("change")); return true; })()`)(ctx, t)
		return chromedp.Void{}, err
	}
}

func containsText(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
