package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/testenv"
)

// The live page updates while a real load runs: a `meshperf load
// --dashboard` (in process) against a real HTTP server publishes to a real
// dashboard, and the page, opened once, shows its calls rising from the
// event stream, draws its chart, and turns done when the load ends.
func TestLivePageFollowsARunningLoad(t *testing.T) {
	s := newSeededStore(t)
	dash := httptest.NewServer(dashboard.New(s.st, nil))
	t.Cleanup(dash.Close)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(target.Close)
	ctx := testenv.NewBrowser(t)

	loadDone := make(chan int, 1)
	go func() {
		loadDone <- cli.Load([]string{"-qps", "100", "-c", "2", "-t", "8s", "-quiet", "-dashboard", dash.URL, target.URL + "/"}, io.Discard, io.Discard)
	}()
	id := waitForLiveSession(t, dash)
	if err := chromedp.Do(ctx, chromedp.Navigate(dash.URL+"/live/"+id), chromedp.WaitVisible(chromedp.ID("live-calls"))); err != nil {
		t.Fatal(err)
	}
	// A marker that a reload would lose: the figures must change in place.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)); err != nil {
		t.Fatal(err)
	}
	first := waitForCalls(t, ctx, 1)
	second := waitForCalls(t, ctx, first+1)
	if err := chromedp.Do(ctx, waitFor(`document.querySelector("#live-chart svg") !== null`)); err != nil {
		t.Fatalf("the live chart is not drawn: %v", err)
	}
	if got := textsOf(t, ctx, "#live-state"); len(got) != 1 || got[0] != "running" {
		t.Errorf("state while the load runs = %q, want running", got)
	}
	maybeScreenshot(t, ctx, "dashboard-live")
	if code := <-loadDone; code != 0 {
		t.Fatalf("load exit %d", code)
	}
	if err := chromedp.Do(ctx, waitFor(`document.getElementById("live-state").textContent === "done"`)); err != nil {
		t.Fatalf("the page does not say done after the load ended: %v", err)
	}
	final := waitForCalls(t, ctx, second)
	same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.sameDocument === true`))
	if err != nil || !same {
		t.Errorf("the page was reloaded (%v): its figures must update from the stream", err)
	}
	if final < 500 {
		t.Errorf("the page ends at %d calls, want about 800 (100 qps for 8 s)", final)
	}
	// The list page shows the session, done.
	if err := chromedp.Do(ctx, chromedp.Navigate(dash.URL+"/live"), chromedp.WaitVisible(chromedp.ID("live-sessions"))); err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, ctx, `#live-sessions tr[data-session="`+id+`"] td.state-done`); len(got) != 1 {
		t.Errorf("the live list does not show session %s as done", id)
	}
}

// waitForLiveSession waits for the load to open its session and returns its id.
func waitForLiveSession(t *testing.T, dash *httptest.Server) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(dash.URL + "/api/live")
		if err != nil {
			t.Fatal(err)
		}
		var sessions []struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&sessions)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(sessions) > 0 {
			return sessions[0].ID
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the load opened no live session in 10 s")
	return ""
}

// waitForCalls waits until the page's call count is at least min, and
// returns it.
func waitForCalls(t *testing.T, ctx context.Context, min int) int {
	t.Helper()
	js := `Number(document.getElementById("live-calls").textContent) >= ` + strconv.Itoa(min)
	if err := chromedp.Do(ctx, waitFor(js)); err != nil {
		t.Fatalf("the page's calls never reached %d: %v (it shows %q)", min, err, textsOf(t, ctx, "#live-calls"))
	}
	n, err := strconv.Atoi(textsOf(t, ctx, "#live-calls")[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
