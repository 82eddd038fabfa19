package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/internal/testenv"
)

// browserTimeout bounds everything one test does in the browser.
const browserTimeout = 60 * time.Second

// newBrowser starts a real headless Chromium (Debian's chromium) for t and
// returns the context that drives its one tab; it is closed with the test.
// The flags keep Chromium off the network: this machine's closed network
// refuses its background connections, many at a time, otherwise.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	chromium := testenv.NeedCommand(t, "chromium", "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	return ctx
}

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
	ctx := newBrowser(t)
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
