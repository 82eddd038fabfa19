package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// regressionSeries is the trends fixture: ten versions of "quick" (1.0.0
// to 1.0.9), the both-sidecars P99 level at about 2 ms for the first five
// and at about 3 ms from 1.0.5 on (run06), so that history finds one
// regression of about +50% between run05 and run06. (Five a side is the
// fewest that a clean step passes history's permutation test with:
// changepoint.Options.MinPoints.)
func regressionSeries(t *testing.T) *httptest.Server {
	var specs []invocationSpec
	for i := range 10 {
		p99 := 2 + 0.01*float64(i)
		if i >= 5 {
			p99 = 3 + 0.01*float64(i)
		}
		specs = append(specs, invocationSpec{fmt.Sprintf("1.0.%d", i), p99})
	}
	return serve(t, newSeededStore(t, specs...))
}

// pageCase is a page's address, the status it answers and what it says.
type pageCase struct {
	path   string
	status int
	msg    string
}

func wantPages(t *testing.T, srv *httptest.Server, cases []pageCase) {
	t.Helper()
	for _, c := range cases {
		wantPage(t, srv, c.path, c.status, c.msg)
	}
}

func TestTrendsPageAnswers(t *testing.T) {
	srv := regressionSeries(t)
	page := wantPage(t, srv, "/trends?scenario=quick", http.StatusOK, `id="panel-p99"`)
	for _, metric := range []string{"p50", "p90", "p99", "added-p99", "vcpu", "mem"} {
		if !strings.Contains(page, `id="panel-`+metric+`"`) {
			t.Errorf("trends page has no %s panel", metric)
		}
	}
	wantPages(t, srv, []pageCase{
		{"/trends", http.StatusOK, `href="/trends?scenario=quick"`},
		{"/trends?scenario=quick&metric=p98", http.StatusBadRequest, "unknown metric &#34;p98&#34;"},
		{"/trends?scenario=quick&metric=e2e-p99", http.StatusBadRequest, "is a cpload figure"},
		{"/trends?scenario=quick&by=branch", http.StatusBadRequest, "unknown grouping &#34;branch&#34;"},
		{"/trends?scenario=quick&mode=ambient", http.StatusBadRequest, "unknown mode &#34;ambient&#34;"},
		{"/trends?scenario=quick&qps=fast", http.StatusBadRequest, "qps=&#34;fast&#34;"},
		{"/trends?scenario=slow", http.StatusNotFound, "unknown scenario &#34;slow&#34;"},
		{"/trends?scenario=quick&metrc=p99", http.StatusBadRequest, "unknown query parameter"},
	})
	// no-mesh adds nothing to itself: those panels say so, the rest draw.
	page = wantPage(t, srv, "/trends?scenario=quick&mode=no-mesh", http.StatusOK, "what a mesh mode adds to no-mesh")
	if !strings.Contains(page, `id="panel-p99"`) {
		t.Errorf("no-mesh trends lost the p99 panel")
	}
}

func TestComparePageAnswers(t *testing.T) {
	srv := twoVersions(t)
	page := wantPage(t, srv, "/compare", http.StatusOK, `<select name="run"`)
	if strings.Count(page, "<option>run01</option>") != 3 {
		t.Errorf("the compare form does not offer run01 in each select:\n%s", page)
	}
	wantPages(t, srv, []pageCase{
		{"/compare?run=run01", http.StatusOK, `id="pick"`},
		{"/compare?run=run01&run=run07", http.StatusNotFound, "run run07: no run matches &#34;run07&#34;"},
		{"/compare?run=run01&run=run02&threshold=five", http.StatusBadRequest, "threshold=&#34;five&#34;: want a number"},
		{"/compare?run=run01&run=run02&confidence=100", http.StatusBadRequest, "confidence=100"},
		{"/compare?a=run01", http.StatusBadRequest, "unknown query parameter"},
		{"/compare?run=run01&run=run02&threshold=5", http.StatusOK, "run02 against run01 (baseline)"},
	})
}
