package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/internal/export"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// screenshotDir, when MESHPERF_SCREENSHOTS names a directory, is where the
// browser tests leave a full-page PNG of each page they check (how the
// pictures under docs/ are made); "" otherwise.
func screenshotDir() string { return os.Getenv("MESHPERF_SCREENSHOTS") }

// maybeScreenshot saves the current page as NAME.png in screenshotDir.
func maybeScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := screenshotDir()
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// textsOf reads the text of every element matching the CSS selector.
func textsOf(t *testing.T, ctx context.Context, selector string) []string {
	t.Helper()
	js := `Array.from(document.querySelectorAll(` + quoteJS(selector) + `)).map(e => e.textContent.trim())`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		t.Fatalf("read %s: %v", selector, err)
	}
	return out
}

// countOf counts the elements matching the CSS selector.
func countOf(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+quoteJS(selector)+`).length`))
	if err != nil {
		t.Fatalf("count %s: %v", selector, err)
	}
	return n
}

// waitFor waits until the JavaScript expression is true in the page (the
// next page has loaded, a chart has been drawn), within the test's time.
func waitFor(expression string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expression)(ctx, t)
		return chromedp.Void{}, err
	}
}

func quoteJS(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

func TestRunsPageListsTheStoredRuns(t *testing.T) {
	srv := twoVersions(t)
	ctx := testenv.NewBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("runs"))); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(textsOf(t, ctx, "#runs tbody tr td:nth-child(2)"), ","); got != "run02,run01" {
		t.Errorf("runs page lists %s, want run02,run01 (newest first)", got)
	}
	if got := strings.Join(textsOf(t, ctx, "#cpruns tbody tr td:first-child"), ","); got != "booklab-1" {
		t.Errorf("control-plane table lists %q, want booklab-1", got)
	}
	maybeScreenshot(t, ctx, "dashboard-runs")

	// Filtering by mesh and version through the form, as a user does.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`input[name=mesh]`), "meshperf-proxy 1.0")); err != nil {
		t.Fatal(err)
	}
	// RunResponse waits for the page the form loads.
	if _, err := chromedp.RunResponse(ctx, chromedp.Submit(chromedp.ID("filters"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, waitFor(`location.search.includes("mesh=")`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(textsOf(t, ctx, "#runs tbody tr td:nth-child(2)"), ","); got != "run01" {
		t.Errorf("filtered by meshperf-proxy 1.0, the page lists %q, want run01", got)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "mesh=meshperf-proxy+1.0") {
		t.Errorf("the filtered page's address %s does not carry the filter (so it cannot be shared)", loc)
	}
	// A scenario filter is data-plane only: the control-plane table goes.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?scenario=quick"), chromedp.WaitVisible(chromedp.ID("runs"))); err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, ctx, "#cpruns"); n != 0 {
		t.Errorf("with scenario=quick the page still shows the control-plane table")
	}
}

func TestRunPageDrawsEachRunsHistogram(t *testing.T) {
	s := newSeededStore(t, invocationSpec{"1.0.0", 2}, invocationSpec{"1.1.0", 4})
	srv := serve(t, s)
	ctx := testenv.NewBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/runs/run02"), chromedp.WaitVisible(chromedp.ID("latency"))); err != nil {
		t.Fatal(err)
	}
	runs, err := s.st.Runs(results.Filter{RunID: "run02"})
	if err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, ctx, "figure.histogram"); n != len(runs) {
		t.Errorf("%d histograms drawn, want one per run (%d)", n, len(runs))
	}
	for _, r := range runs {
		fig := "figure#histogram-" + export.ResultName(r)
		want := nonEmptyBuckets(r.Histogram)
		if want == len(r.Histogram) {
			t.Fatalf("the fixture's histogram has no empty bucket: the bar count would not tell bars from buckets")
		}
		if got := countOf(t, ctx, fig+" svg g.histogram-bars > path"); got != want {
			t.Errorf("%s: %d bars, want one per non-empty bucket (%d of %d)", fig, got, want, len(r.Histogram))
		}
		texts := strings.Join(textsOf(t, ctx, fig+" svg text"), "|")
		for _, p := range []string{"P50 ", "P90 ", "P99 ", "P99.9 ", "cumulative % (line)"} {
			if !strings.Contains(texts, p) {
				t.Errorf("%s: no %q label among %s", fig, p, texts)
			}
		}
	}
	// The lab report's tables and charts, as report.html has them.
	if n := countOf(t, ctx, "#report table#summary tbody tr"); n != 2 {
		t.Errorf("the report's summary has %d rows, want 2 (no-mesh, both-sidecars)", n)
	}
	kinds := strings.Join(attrsOf(t, ctx, "#report figure", "data-kind"), ",")
	for _, k := range []string{"added-latency", "spectrum", "proxy-cpu", "proxy-memory"} {
		if !strings.Contains(kinds, k) {
			t.Errorf("the report's charts are %s: no %s", kinds, k)
		}
	}
	if got := strings.Join(textsOf(t, ctx, "#report-header dd"), "|"); !strings.Contains(got, "meshperf-proxy 1.1.0 in both-sidecars") {
		t.Errorf("the header's provenance is %s", got)
	}
	if n := countOf(t, ctx, "a.fortio-json"); n != len(runs) {
		t.Errorf("%d Fortio JSON links, want %d", n, len(runs))
	}
	maybeScreenshot(t, ctx, "dashboard-run")
}

func TestControlPlaneRunPageShowsItsFigures(t *testing.T) {
	s := newSeededStore(t)
	if err := s.st.InsertControlPlaneRun(controlPlaneTest(t, "churn-200", day1, 61)); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, s)
	ctx := testenv.NewBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("cpruns"))); err != nil {
		t.Fatal(err)
	}
	// From the runs page, as a user gets there.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#cpruns a[href="/cpruns/churn-200"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("cprun-figures"))); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"proxies": "200", "services": "40", "missed": "3", "pushes": "41", "convergence P99": "14",
		"end-to-end P99": "61", "end-to-end max": "91.5", "all synced": "452", "CPU": "3.25", "RSS max": "96.5", "config per sidecar": "81234"}
	for name, value := range want {
		if got := textsOf(t, ctx, `#cprun-figures tr[data-figure="`+name+`"] td.n`); len(got) != 1 || got[0] != value {
			t.Errorf("figure %s reads %v, want %s", name, got, value)
		}
	}
	parts := strings.Join(attrsOf(t, ctx, "table.report-part", "data-part"), ",")
	if parts != "report,connect,configSize,churn,controlPlane,process,provenance" {
		t.Errorf("the report's parts are %s", parts)
	}
	maybeScreenshot(t, ctx, "dashboard-cprun")
}

func TestFortioPagesListAndDraw(t *testing.T) {
	dir, _ := fortioDataDir(t)
	srv := serveDataDir(t, dir)
	ctx := testenv.NewBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/fortio/"), chromedp.WaitVisible(chromedp.ID("fortio-files"))); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(attrsOf(t, ctx, "#fortio-files tbody tr", "data-file"), ","); got != "broken.json,fortio-http.json,nighthawk-fortio.json" {
		t.Errorf("/fortio/ lists %s", got)
	}
	if n := countOf(t, ctx, "#fortio-files tr.unreadable"); n != 1 {
		t.Errorf("%d unreadable rows, want 1 (broken.json)", n)
	}
	maybeScreenshot(t, ctx, "dashboard-fortio")
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`a[href="/fortio/nighthawk-fortio.json"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("figure.histogram"))); err != nil {
		t.Fatal(err)
	}
	r, err := results.ReadFortioFile(filepath.Join(dir, "nighthawk-fortio.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := countOf(t, ctx, "figure.histogram svg g.histogram-bars > path"), nonEmptyBuckets(r.Histogram); got != want || want == 0 {
		t.Errorf("nighthawk-fortio.json: %d bars, want %d", got, want)
	}
	maybeScreenshot(t, ctx, "dashboard-fortio-file")
}

// attrsOf reads an attribute of every element matching the CSS selector.
func attrsOf(t *testing.T, ctx context.Context, selector, attr string) []string {
	t.Helper()
	js := `Array.from(document.querySelectorAll(` + quoteJS(selector) + `)).map(e => e.getAttribute(` + quoteJS(attr) + `) || "")`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		t.Fatalf("read %s of %s: %v", attr, selector, err)
	}
	return out
}
