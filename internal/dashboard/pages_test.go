package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/export"
	"github.com/meshperf/meshperf/internal/results"
)

// wantPage checks an HTML answer: its status and that it says each of want.
func wantPage(t *testing.T, srv *httptest.Server, path string, status int, want ...string) string {
	t.Helper()
	got, ctype, body := get(t, srv, path)
	if got != status || !strings.HasPrefix(ctype, "text/html") {
		t.Errorf("GET %s = %d %s, want %d and an HTML page", path, got, ctype, status)
	}
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			t.Errorf("GET %s: the page does not say %q", path, w)
		}
	}
	return string(body)
}

func TestRunPageAndItsFortioJSON(t *testing.T) {
	s := newSeededStore(t, invocationSpec{"1.0.0", 2})
	// A run stored before histograms were, its result file gone: its
	// spectrum is drawn instead, and the page says so.
	old := labRun("old01", "both-sidecars", 1, day1.AddDate(0, 0, -7), invocationSpec{"0.9.0", 2})
	old.Histogram = nil
	if err := s.st.Insert(old); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, s)
	body := wantPage(t, srv, "/runs/run01", http.StatusOK, `<dl class="meta">`, "meshperf-proxy 1.0.0 in both-sidecars",
		`<table id="summary">`, `data-kind="added-latency"`, `href="/api/runs/run01/csv"`)
	if n := strings.Count(body, `class="histogram"`); n != 6 {
		t.Errorf("run01's page draws %d histograms, want one per run (6)", n)
	}
	wantPage(t, srv, "/runs/old01", http.StatusOK, `class="spectrum"`, "No histogram</span>: stored before histograms were")
	wantPage(t, srv, "/runs/run09", http.StatusNotFound, `unknown run id &#34;run09&#34;`)
	wantPage(t, srv, "/runs/run01?x=1", http.StatusBadRequest, "unknown query parameter")

	runs, err := s.st.Runs(results.Filter{RunID: "run01"})
	if err != nil {
		t.Fatal(err)
	}
	name := export.ResultName(runs[5])
	if !strings.Contains(body, `href="/api/runs/run01/fortio/`+name+`"`) {
		t.Errorf("the page does not link %s's Fortio JSON", name)
	}
	status, ctype, data := get(t, srv, "/api/runs/run01/fortio/"+name)
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET its Fortio JSON = %d %s %s", status, ctype, data)
	}
	back, err := results.FromFortioJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Label != runs[5].Label || back.Calls != runs[5].Calls || len(back.Histogram) != len(runs[5].Histogram) ||
		back.Provenance != runs[5].Provenance {
		t.Errorf("the Fortio JSON reads back as %+v, want run %s with its %d buckets", back, name, len(runs[5].Histogram))
	}
	wantError(t, srv, "/api/runs/run01/fortio/nosuch", http.StatusNotFound, `run run01 has no result "nosuch"`)
	wantError(t, srv, "/api/runs/run09/fortio/"+name, http.StatusNotFound, `unknown run id "run09"`)
}

// controlPlaneTest is a cpload run's report as cpload run -db stores it.
func controlPlaneTest(t *testing.T, name string, start time.Time, p99 float64) results.ControlPlaneRun {
	t.Helper()
	r := &driver.Report{Name: name, Shape: "booklab", Started: start, Target: "127.0.0.1:15010", Proxies: 200, Services: 40,
		Resources: 60, Scoping: "none",
		Connect:      driver.ConnectFigures{AllConnected: 310, AllSynced: 452.5, FirstConfig: driver.Percentiles{N: 200, P50: 80, P90: 120, P99: 150, Max: 170}},
		ConfigSize:   driver.ConfigSizeFigures{SidecarMean: 81234, SidecarMax: 90000, ByTypeMean: map[string]float64{"CDS": 30000, "LDS": 40000}},
		Churn:        &driver.ChurnFigures{Kind: "endpoints", Changes: 20, EndToEnd: driver.Percentiles{N: 4000, P50: 12, P90: 25, P99: p99, Max: p99 * 1.5}, Expected: 4000, Missed: 3},
		ControlPlane: &driver.ControlPlaneFigures{Pushes: 41, PushesByType: map[string]float64{"eds": 41}, Convergence: driver.Percentiles{N: 41, P50: 5, P90: 9, P99: 14}},
		Process:      &driver.ProcessFigures{Source: "procstat", CPUSeconds: 3.25, RSSMaxMB: 96.5},
		Provenance:   results.Provenance{Meshperf: results.Build{Version: "v0.9.0"}, ControlPlane: results.Component{Name: results.ComponentPilot, Version: "v0.9.0"}, Machine: labMachine},
	}
	row, err := r.StoreRow()
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func TestControlPlaneRunPageAndJSON(t *testing.T) {
	s := newSeededStore(t)
	for i, p99 := range []float64{61, 64} { // the same label twice
		if err := s.st.InsertControlPlaneRun(controlPlaneTest(t, "churn-200", day1.Add(time.Duration(i)*time.Hour), p99)); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, s)
	body := wantPage(t, srv, "/cpruns/churn-200", http.StatusOK, `id="cprun-figures"`, "meshperf-pilot v0.9.0",
		`data-part="connect"`, "firstConfig.p99Ms", "1 other test stored under this label", "?start=2026-11-01T09%3a00%3a00Z")
	if !strings.Contains(body, `<tr data-figure="end-to-end P99"><td>end-to-end P99</td><td class="n">64</td>`) {
		t.Errorf("the page does not show the newest test's end-to-end P99 (64 ms)")
	}
	wantPage(t, srv, "/cpruns/churn-200?start=2026-11-01T09:00:00Z", http.StatusOK, `<td class="n">61</td>`)
	wantPage(t, srv, "/cpruns/nosuch", http.StatusNotFound, "unknown control-plane load test")
	wantPage(t, srv, "/cpruns/churn-200?start=noon", http.StatusBadRequest, "start=&#34;noon&#34;")

	var got struct {
		Label    string
		Services int
		E2EP99Ms *float64 `json:"e2e_p99_ms"`
		E2EMaxMs *float64 `json:"e2e_max_ms"`
		CPU      *float64 `json:"cpu_seconds"`
		RSS      *float64 `json:"rss_max_mb"`
		Report   struct{ Churn struct{ Missed int } }
	}
	getJSON(t, srv, "/api/cpruns/churn-200?start=2026-11-01T09:00:00Z", &got)
	if got.Label != "churn-200" || got.Services != 40 || *got.E2EP99Ms != 61 || *got.E2EMaxMs != 91.5 || *got.CPU != 3.25 ||
		*got.RSS != 96.5 || got.Report.Churn.Missed != 3 {
		t.Errorf("/api/cpruns/churn-200 = %+v", got)
	}
	getJSON(t, srv, "/api/cpruns/churn-200", &got)
	if *got.E2EP99Ms != 64 {
		t.Errorf("without start, the answer is the test with P99 %v, want the newest (64)", *got.E2EP99Ms)
	}
	wantError(t, srv, "/api/cpruns/nosuch", http.StatusNotFound, `unknown control-plane load test "nosuch"`)
	wantError(t, srv, "/api/cpruns/churn-200?start=2026-11-01T07:00:00Z", http.StatusNotFound, "started at")
	wantError(t, srv, "/api/cpruns/churn-200?n=2", http.StatusBadRequest, `unknown query parameter "n"`)
}

// fortioDataDir is a data directory as a user fills one: a Fortio result,
// Nighthawk's fortio output (the interop tests' real files), a JSON file
// that is no result, a text file, a directory and a link that are not
// results.
func fortioDataDir(t *testing.T) (dir, outside string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"fortio-http.json", "nighthawk-fortio.json"} {
		data, err := os.ReadFile(filepath.Join("..", "results", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside = filepath.Join(t.TempDir(), "secret.json")
	for path, content := range map[string]string{
		filepath.Join(dir, "broken.json"): `{"hello": "world"}`, filepath.Join(dir, "notes.txt"): "not listed",
		outside: `{"secret": true}`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	return dir, outside
}

func serveDataDir(t *testing.T, dir string) *httptest.Server {
	srv := httptest.NewServer(dashboard.New(newSeededStore(t).st, nil, dashboard.WithDataDir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

func TestFortioDataDirectory(t *testing.T) {
	dir, _ := fortioDataDir(t)
	srv := serveDataDir(t, dir)
	var list []struct {
		File        string
		Error       string
		Labels      string
		Connections int
		P99Ms       *float64 `json:"p99_ms"`
		Tool        string
	}
	getJSON(t, srv, "/api/fortio", &list)
	var files []string
	for _, f := range list {
		files = append(files, f.File)
	}
	if strings.Join(files, " ") != "broken.json fortio-http.json nighthawk-fortio.json" {
		t.Fatalf("/api/fortio lists %v, want the three regular .json files", files)
	}
	if list[0].Error == "" || !strings.Contains(list[0].Error, "not a Fortio result") {
		t.Errorf("broken.json: error %q, want why it is not a result", list[0].Error)
	}
	if f := list[1]; f.Error != "" || !strings.HasPrefix(f.Tool, "fortio 1.75") || f.P99Ms == nil || f.Connections == 0 {
		t.Errorf("fortio-http.json = %+v", f)
	}
	if f := list[2]; f.Error != "" || f.Tool != "nighthawk 0.5.0" || f.Labels != "nighthawk loopback" {
		t.Errorf("nighthawk-fortio.json = %+v", f)
	}
	// The file as it is.
	want, _ := os.ReadFile(filepath.Join(dir, "nighthawk-fortio.json"))
	if status, ctype, body := get(t, srv, "/api/fortio/nighthawk-fortio.json"); status != http.StatusOK || ctype != "application/json" || string(body) != string(want) {
		t.Errorf("GET /api/fortio/nighthawk-fortio.json = %d %s, not the file", status, ctype)
	}
	// Only regular .json files directly in the directory: no link, no
	// directory, no other file, no way out.
	for _, path := range []string{"link.json", "sub.json", "notes.txt", "..%2Fsecret.json", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd.json", ".json", "nosuch.json"} {
		wantError(t, srv, "/api/fortio/"+path, http.StatusNotFound, "no result file")
		wantPage(t, srv, "/fortio/"+path, http.StatusNotFound, "no result file")
	}
	wantPage(t, srv, "/fortio/", http.StatusOK, `id="fortio-files"`, "unreadable</span>: read load result", `href="/fortio/nighthawk-fortio.json"`)
	wantPage(t, srv, "/fortio/nighthawk-fortio.json", http.StatusOK, `class="histogram"`, "nighthawk 0.5.0")
	wantPage(t, srv, "/fortio/broken.json", http.StatusOK, `id="unreadable"`)

	// A file added while the dashboard runs is listed at once.
	if err := os.WriteFile(filepath.Join(dir, "added.json"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	getJSON(t, srv, "/api/fortio", &list)
	if len(list) != 4 || list[0].File != "added.json" {
		t.Errorf("after adding added.json, /api/fortio lists %+v", list)
	}

	// Without -data-dir the page says how to set it, the API 404s.
	plain := twoVersions(t)
	wantPage(t, plain, "/fortio/", http.StatusOK, "meshperf dashboard -data-dir DIR")
	wantError(t, plain, "/api/fortio", http.StatusNotFound, "no data directory: start meshperf dashboard with -data-dir DIR")
	wantError(t, plain, "/api/fortio/fortio-http.json", http.StatusNotFound, "no data directory")
}
