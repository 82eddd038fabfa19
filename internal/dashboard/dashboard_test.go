package dashboard_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/results"
)

// labMachine is the machine every seeded run was made on.
var labMachine = results.Machine{Hostname: "bench-1", CPUs: 8, CPUModel: "AMD EPYC 7B13", MemoryMB: 32768, Kernel: "Linux 6.1.0"}

// seededStore is a results database filled the way the lab fills one:
// for each invocation, three repetitions of no-mesh and both-sidecars at
// 1000 qps over 16 connections, with the sidecars' figures, a latency
// spectrum and the provenance of the data plane's version.
type seededStore struct {
	path string
	st   *results.Store
}

// invocationSpec is one seeded invocation: the data plane's version and
// the both-sidecars P99 around which its repetitions fall.
type invocationSpec struct {
	version string
	p99     float64
}

var day1 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func newSeededStore(t *testing.T, invocations ...invocationSpec) *seededStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meshperf.db")
	st, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for n, inv := range invocations {
		runID := fmt.Sprintf("run%02d", n+1)
		start := day1.AddDate(0, 0, n)
		for rep := 1; rep <= 3; rep++ {
			for i, mode := range []string{results.ModeNoMesh, "both-sidecars"} {
				if err := st.Insert(labRun(runID, mode, rep, start.Add(time.Duration(2*rep+i)*time.Minute), inv)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A control-plane load test, as cpload run -db stores one.
	p99 := 41.5
	if err := st.InsertControlPlaneRun(results.ControlPlaneRun{
		Label: "booklab-1", Shape: "booklab", Start: day1.Add(time.Hour), Target: "127.0.0.1:15010", Proxies: 100,
		Services: 50, Sidecar: "none", Churn: "endpoints", Changes: 20, E2EP99: &p99,
		ReportJSON: `{"shape":"booklab","proxies":100}`,
		Provenance: results.Provenance{Meshperf: results.Build{Version: "v0.9.0"}, Machine: labMachine},
	}); err != nil {
		t.Fatal(err)
	}
	return &seededStore{path: path, st: st}
}

// labRun is one repetition of one mode; the repetitions of an invocation
// differ by a few percent, as real ones do.
func labRun(runID, mode string, rep int, start time.Time, inv invocationSpec) results.Run {
	prov := results.Provenance{Meshperf: results.Build{Version: "v0.9.0", Commit: "0123456789abcdef0123"},
		ParamsHash: "5e1f0c2a9b3d4e6f", Labels: "nightly", Machine: labMachine}
	level := 1.0
	var procs []results.Process
	if mode != results.ModeNoMesh {
		level = inv.p99
		prov.DataPlane = results.Component{Name: results.ComponentProxy, Version: inv.version}
		prov.ControlPlane = results.Component{Name: results.ComponentPilot, Version: "v0.9.0"}
		procs = []results.Process{
			{Role: results.RoleClientSidecar, PID: 4100 + rep, VCPU: 0.12, RSSMB: 11.2, PSSMB: math.NaN(), MaxRSSMB: 12},
			{Role: results.RoleServerSidecar, PID: 4200 + rep, VCPU: 0.10, RSSMB: 10.8, PSSMB: 9.5, MaxRSSMB: 11.5,
				Counters: &results.ProcessCounters{UserVCPU: 0.04, SystemVCPU: 0.06, SyscallsPerRequest: math.NaN(),
					VoluntarySwitchesPerRequest: 1.5, InvoluntarySwitchesPerRequest: 0.02, AllocationsPerRequest: math.NaN()}},
		}
	}
	v := level * (1 + 0.02*float64(rep-2))
	lat := results.Latency{Min: v / 10, Max: v * 2, Avg: v / 3, P50: v / 4, P75: v / 3, P90: v / 2, P99: v, P999: v * 1.5, P9999: v * 1.8}
	return results.Run{
		RunID: runID, Label: fmt.Sprintf("%s_qps_1000_c_16_1024_%s", runID, mode), Scenario: "quick",
		Mode: mode, Protocol: "http", Repetition: rep, Connections: 16, RequestedQPS: 1000, ActualQPS: 999.7,
		Duration: 30 * time.Second, PayloadSize: 1024, ResponseSize: 1141, StartTime: start, Network: "netns",
		Latency:   lat,
		Spectrum:  []results.PercentileValue{{Percentile: 50, Ms: v / 4}, {Percentile: 99, Ms: v}},
		Histogram: labHistogram(v, 29991),
		Corrected: true, Calls: 29991, Errors: 0, SendDelayP99: 0.21, Processes: procs, FortioJSON: "/tmp/lab/" + runID + ".json",
		Provenance: prov,
	}
}

// labHistogram buckets calls as a load generator would for a run whose
// latency is Min v/10, P50 v/4, P75 v/3, P90 v/2, P99 v, P99.9 1.5v,
// P99.99 1.8v and Max 2v: buckets v/20 wide, each holding the calls the
// percentiles put there. One bucket of the tail is empty (its calls are
// in the next), as a sparse tail leaves some.
func labHistogram(v float64, calls int64) []results.HistogramBucket {
	points := []struct{ ms, pct float64 }{{v / 10, 0}, {v / 4, 50}, {v / 3, 75}, {v / 2, 90}, {v, 99}, {1.5 * v, 99.9}, {1.8 * v, 99.99}, {2 * v, 100}}
	cumulative := func(ms float64) float64 {
		for i := 1; i < len(points); i++ {
			if ms <= points[i].ms {
				a, b := points[i-1], points[i]
				return (a.pct + (b.pct-a.pct)*(ms-a.ms)/(b.ms-a.ms)) / 100
			}
		}
		return 1
	}
	var out []results.HistogramBucket
	counted := int64(0)
	for i := 0; ; i++ {
		start, end := v/10+float64(i)*v/20, v/10+float64(i+1)*v/20
		if start >= 2*v-1e-9 {
			break
		}
		n := int64(math.Round(cumulative(end)*float64(calls))) - counted
		out = append(out, results.HistogramBucket{StartMs: start, EndMs: end, Count: n})
		counted += n
	}
	gap := len(out) - 3
	out[gap+1].Count += out[gap].Count
	out[gap].Count = 0
	return out
}

// nonEmptyBuckets counts the buckets a histogram chart draws a bar for.
func nonEmptyBuckets(h []results.HistogramBucket) int {
	n := 0
	for _, b := range h {
		if b.Count > 0 {
			n++
		}
	}
	return n
}

// get asks the API over a real HTTP connection and returns the status,
// the content type and the body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// getJSON is get for a 200 JSON answer decoded into out.
func getJSON(t *testing.T, srv *httptest.Server, path string, out any) {
	t.Helper()
	status, ctype, body := get(t, srv, path)
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET %s = %d %s %s, want 200 application/json", path, status, ctype, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// wantError checks an error answer: its status and the one-line message.
func wantError(t *testing.T, srv *httptest.Server, path string, status int, msg string) {
	t.Helper()
	got, ctype, body := get(t, srv, path)
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || got != status || ctype != "application/json" ||
		!strings.Contains(e.Error, msg) || strings.Contains(e.Error, "\n") {
		t.Errorf("GET %s = %d %s %s, want %d and an error line containing %q", path, got, ctype, body, status, msg)
	}
}

func serve(t *testing.T, s *seededStore) *httptest.Server {
	srv := httptest.NewServer(dashboard.New(s.st, nil))
	t.Cleanup(srv.Close)
	return srv
}

// twoVersions is the fixture most tests read: two invocations of "quick",
// the second by a data plane whose P99 doubled.
func twoVersions(t *testing.T) *httptest.Server {
	return serve(t, newSeededStore(t, invocationSpec{"1.0.0", 2}, invocationSpec{"1.1.0", 4}))
}

func TestIndexListsTheEndpoints(t *testing.T) {
	srv := twoVersions(t)
	var index struct {
		Endpoints []struct{ Method, Path, About string }
	}
	getJSON(t, srv, "/api/", &index)
	var routes []string
	for _, e := range index.Endpoints {
		if (e.Method != "GET" && e.Method != "POST") || e.About == "" {
			t.Errorf("endpoint %+v: want GET or POST and what it answers", e)
		}
		routes = append(routes, e.Method+" "+e.Path)
	}
	want := "GET /api/scenarios, GET /api/runs, GET /api/runs/{id}, GET /api/runs/{id}/csv, GET /api/runs/{id}/fortio/{result}, " +
		"GET /api/compare, GET /api/history, GET /api/cpruns, GET /api/cpruns/{label}, GET /api/fortio, GET /api/fortio/{file}, " +
		"GET /api/live, POST /api/live, POST /api/live/start, GET /api/live/{id}, " +
		"POST /api/live/{id}/events, GET /api/live/{id}/stream, GET /live/{id}/chart.svg"
	if got := strings.Join(routes, ", "); got != want {
		t.Errorf("index lists %s, want %s", got, want)
	}
	wantError(t, srv, "/api/nosuch", http.StatusNotFound, "no such endpoint GET /api/nosuch")
	// Outside /api/ a path the dashboard does not serve is a page.
	if status, ctype, body := get(t, srv, "/index.html"); status != http.StatusNotFound ||
		!strings.HasPrefix(ctype, "text/html") || !strings.Contains(string(body), "no such page GET /index.html") {
		t.Errorf("GET /index.html = %d %s %q, want 404 and an HTML page saying so", status, ctype, body)
	}
	// The store's API is read-only: a POST where only the live endpoints
	// take one is answered as a path it does not serve, in JSON like every
	// error.
	resp, err := http.Post(srv.URL+"/api/runs", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"no such endpoint POST /api/runs: GET /api/ lists them"`) {
		t.Errorf("POST /api/runs = %d %s, want 404 and a JSON error", resp.StatusCode, body)
	}
}

func TestScenarios(t *testing.T) {
	srv := twoVersions(t)
	var got []struct {
		Scenario          string
		Invocations, Runs int
		First, Last       time.Time
	}
	getJSON(t, srv, "/api/scenarios", &got)
	if len(got) != 1 || got[0].Scenario != "quick" || got[0].Invocations != 2 || got[0].Runs != 12 ||
		!got[0].First.Equal(day1.Add(2*time.Minute)) || !got[0].Last.Equal(day1.AddDate(0, 0, 1).Add(7*time.Minute)) {
		t.Errorf("scenarios = %+v, want quick with 2 invocations of 6 runs from day 1 to day 2", got)
	}
	wantError(t, srv, "/api/scenarios?x=1", http.StatusBadRequest, `unknown query parameter "x": this endpoint takes none`)
}

type invocation struct {
	RunID      string `json:"run_id"`
	Scenario   string
	Start      time.Time
	Modes      []string
	Runs       int
	Labels     []string
	Provenance struct {
		Meshperf      []string
		DataPlanes    []string `json:"data_planes"`
		ControlPlanes []string `json:"control_planes"`
		ParamsHashes  []string `json:"params_hashes"`
		Machines      []string
	}
}

func runIDs(list []invocation) string {
	var ids []string
	for _, inv := range list {
		ids = append(ids, inv.RunID)
	}
	return strings.Join(ids, ",")
}

func TestRunsNewestFirstWithProvenance(t *testing.T) {
	srv := twoVersions(t)
	var list []invocation
	getJSON(t, srv, "/api/runs", &list)
	if runIDs(list) != "run02,run01" {
		t.Fatalf("runs = %s, want run02,run01 (newest first)", runIDs(list))
	}
	newest := list[0]
	if newest.Scenario != "quick" || newest.Runs != 6 || strings.Join(newest.Modes, ",") != "no-mesh,both-sidecars" ||
		!newest.Start.Equal(day1.AddDate(0, 0, 1).Add(2*time.Minute)) || strings.Join(newest.Labels, ",") != "nightly" {
		t.Errorf("run02 = %+v", newest)
	}
	p := newest.Provenance
	if strings.Join(p.DataPlanes, "; ") != "none in no-mesh; meshperf-proxy 1.1.0 in both-sidecars" ||
		len(p.Meshperf) != 1 || !strings.HasPrefix(p.Meshperf[0], "v0.9.0 (commit 0123456789ab") ||
		strings.Join(p.ParamsHashes, ",") != "5e1f0c2a9b3d4e6f" || len(p.Machines) != 1 || !strings.Contains(p.Machines[0], "8 CPUs (AMD EPYC 7B13)") {
		t.Errorf("run02's provenance = %+v", p)
	}

	for query, want := range map[string]string{
		"?scenario=quick":     "run02,run01",
		"?mode=both-sidecars": "run02,run01",
		"?mode=ambient":       "",
		"?label=nightly":      "run02,run01",
		"?label=release":      "",
		"?machine=" + url.QueryEscape(labMachine.Key()): "run02,run01",
		"?machine=other":                            "",
		"?from=2026-11-02":                          "run02",
		"?to=2026-11-01":                            "run01", // a date as the end takes in the whole day
		"?from=2026-11-01T09:05:00Z":                "run02,run01",
		"?from=2026-11-01T09:09:00Z&to=2026-11-02":  "run02",
		"?scenario=quick&to=2026-11-02T09:00:00Z":   "run01",
		"?scenario=quick&from=2026-11-03&mode=none": "",
		"?mesh=meshperf-proxy+1.1":                  "run02",
		"?mesh=MESHPERF-PROXY":                      "run02,run01", // case does not matter
		"?mesh=istiod":                              "",
		"?search=run01":                             "run01",
		"?search=NIGHT":                             "run02,run01", // the provenance's labels
		"?search=c_16_1024_both":                    "run02,run01", // the runs' labels
		"?search=ambient":                           "",
	} {
		var got []invocation
		getJSON(t, srv, "/api/runs"+query, &got)
		if runIDs(got) != want {
			t.Errorf("/api/runs%s = %q, want %q", query, runIDs(got), want)
		}
	}
	wantError(t, srv, "/api/runs?from=yesterday", http.StatusBadRequest, `from="yesterday": want RFC 3339`)
	wantError(t, srv, "/api/runs?to=2026-13-01", http.StatusBadRequest, `to="2026-13-01"`)
	wantError(t, srv, "/api/runs?scenari=quick", http.StatusBadRequest, `unknown query parameter "scenari": want one of scenario, mode, mesh, label, search, machine, from, to`)
	wantError(t, srv, "/api/runs?scenario=slow", http.StatusNotFound, `unknown scenario "slow"`)
}

func TestRunHasEveryRepetitionWithNullForUnknown(t *testing.T) {
	srv := twoVersions(t)
	status, _, raw := get(t, srv, "/api/runs/run01")
	if status != http.StatusOK {
		t.Fatalf("GET /api/runs/run01 = %d %s", status, raw)
	}
	var d struct {
		RunID string `json:"run_id"`
		Runs  []struct {
			Label      string
			Mode       string
			Repetition int
			LatencyMs  struct{ P99 float64 } `json:"latency_ms"`
			Spectrum   []struct{ Percentile, Ms float64 }
			Processes  []struct {
				Role     string
				PSSMB    *float64 `json:"pss_mb"`
				Counters *struct {
					SystemVCPU float64  `json:"system_vcpu"`
					Syscalls   *float64 `json:"syscalls_per_request"`
				}
			}
			DurationSeconds float64 `json:"duration_seconds"`
			Provenance      results.Provenance
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.RunID != "run01" || len(d.Runs) != 6 {
		t.Fatalf("run01 = %s, want its 6 runs", raw)
	}
	last := d.Runs[5]
	if last.Label != "run01_qps_1000_c_16_1024_both-sidecars" || last.Repetition != 3 || last.DurationSeconds != 30 ||
		math.Abs(last.LatencyMs.P99-2.04) > 1e-9 || len(last.Spectrum) != 2 || last.Spectrum[1].Percentile != 99 ||
		last.Provenance.DataPlane.Version != "1.0.0" {
		t.Errorf("run01's last run = %+v", last)
	}
	if len(last.Processes) != 2 || last.Processes[0].PSSMB != nil || last.Processes[1].PSSMB == nil || *last.Processes[1].PSSMB != 9.5 {
		t.Errorf("processes = %+v, want the client sidecar's unknown PSS as null and the server's 9.5", last.Processes)
	}
	if c := last.Processes[1].Counters; last.Processes[0].Counters != nil || c == nil || c.SystemVCPU != 0.06 || c.Syscalls != nil {
		t.Errorf("counters: client %+v, server %+v; want none for the client, the server's with unknown syscalls as null",
			last.Processes[0].Counters, c)
	}
	if !bytes.Contains(raw, []byte(`"pss_mb": null`)) {
		t.Errorf("no null pss_mb in %s", raw)
	}
	wantError(t, srv, "/api/runs/run09", http.StatusNotFound, `unknown run id "run09"`)
	wantError(t, srv, "/api/runs/run01?full=1", http.StatusBadRequest, `unknown query parameter "full"`)
}

func TestRunCSVIsIstios(t *testing.T) {
	srv := twoVersions(t)
	status, ctype, body := get(t, srv, "/api/runs/run02/csv")
	if status != http.StatusOK || ctype != "text/csv; charset=utf-8" {
		t.Fatalf("GET csv = %d %s", status, ctype)
	}
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes WriteCSV gives for the stored runs.
	var want bytes.Buffer
	var runs []results.Run
	for rep := 1; rep <= 3; rep++ {
		for i, mode := range []string{results.ModeNoMesh, "both-sidecars"} {
			runs = append(runs, labRun("run02", mode, rep, day1.AddDate(0, 0, 1).Add(time.Duration(2*rep+i)*time.Minute), invocationSpec{"1.1.0", 4}))
		}
	}
	if err := results.WriteCSV(&want, runs); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || rows[0][0] != "Labels" || !strings.HasPrefix(rows[1][0], "run02_qps_1000_c_16_1024_no-mesh") {
		t.Errorf("CSV has %d rows, first %v: want the header and 6 runs of run02", len(rows), rows[0])
	}
	if got := string(body); got != want.String() {
		t.Errorf("CSV =\n%s\nwant WriteCSV's\n%s", got, want.String())
	}
	wantError(t, srv, "/api/runs/nosuch/csv", http.StatusNotFound, `unknown run id "nosuch"`)
}

// cliOutput runs a meshperf command and returns its stdout, failing on an
// exit status other than want.
func cliOutput(t *testing.T, want int, run func([]string, io.Writer, io.Writer) int, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != want {
		t.Fatalf("%v exited %d, want %d: %s", args, code, want, stderr.String())
	}
	return stdout.Bytes()
}

func TestCompareIsCompareJSON(t *testing.T) {
	s := newSeededStore(t, invocationSpec{"1.0.0", 2}, invocationSpec{"1.1.0", 4})
	srv := serve(t, s)
	status, ctype, body := get(t, srv, "/api/compare?a=run01&b=run02&threshold=5&confidence=95")
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET compare = %d %s %s", status, ctype, body)
	}
	want := cliOutput(t, 1, cli.Compare, "-db", s.path, "-json", "run01", "run02") // exit 1: a row is worse
	if !bytes.Equal(body, want) {
		t.Errorf("compare answer differs from meshperf compare -json:\n%s\nwant\n%s", body, want)
	}
	rep, err := compare.ReadJSON(bytes.NewReader(body))
	if err != nil || rep.Verdict != compare.VerdictWorse {
		t.Errorf("verdict %q, %v: want worse (P99 doubled)", rep.Verdict, err)
	}
	// A label selects too; the same side twice is no change.
	getJSON(t, srv, "/api/compare?a=nightly&b=nightly", &rep)
	if rep.Verdict == compare.VerdictWorse {
		t.Errorf("nightly against itself: verdict %q", rep.Verdict)
	}

	wantError(t, srv, "/api/compare?a=run01", http.StatusBadRequest, "b is missing")
	wantError(t, srv, "/api/compare?a=run01&b=run02&confidence=100", http.StatusBadRequest, "confidence=100: want a percent more than 0 and less than 100")
	wantError(t, srv, "/api/compare?a=run01&b=run02&threshold=five", http.StatusBadRequest, `threshold="five": want a number`)
	wantError(t, srv, "/api/compare?a=run01&b=run02&threshold=-1", http.StatusBadRequest, "threshold=-1")
	wantError(t, srv, "/api/compare?a=run01&b=run07", http.StatusNotFound, `side b: no run matches "run07"`)
	// A path is not a selector here: the server reads no files for a request.
	wantError(t, srv, "/api/compare?a=run01&b="+s.path, http.StatusNotFound, "no run matches")
}

func TestHistoryIsHistoryJSON(t *testing.T) {
	// Six invocations of 1.0.0 at 2 ms, then six of 1.1.0 at 3 ms: one
	// change point, a regression, between run06 and run07. (Fewer points
	// could not reach the permutation test's 1% significance.)
	var specs []invocationSpec
	for i := range 12 {
		if i < 6 {
			specs = append(specs, invocationSpec{"1.0.0", 2 + 0.01*float64(i)})
		} else {
			specs = append(specs, invocationSpec{"1.1.0", 3 + 0.01*float64(i)})
		}
	}
	s := newSeededStore(t, specs...)
	srv := serve(t, s)
	status, _, body := get(t, srv, "/api/history?scenario=quick&metric=p99&by=version")
	if status != http.StatusOK {
		t.Fatalf("GET history = %d %s", status, body)
	}
	want := cliOutput(t, 1, cli.History, "quick", "-db", s.path, "-json", "-metric", "p99") // exit 1: a regression
	if !bytes.Equal(body, want) {
		t.Errorf("history answer differs from meshperf history -json:\n%s\nwant\n%s", body, want)
	}
	var a struct {
		Points       []struct{ Group string }
		ChangePoints []struct {
			RunIDBefore string `json:"run_id_before"`
			RunIDAfter  string `json:"run_id_after"`
			Verdict     string
		} `json:"change_points"`
		Regression bool
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Points) != 12 || len(a.ChangePoints) != 1 || !a.Regression || a.ChangePoints[0].Verdict != "regression" ||
		a.ChangePoints[0].RunIDBefore != "run06" || a.ChangePoints[0].RunIDAfter != "run07" {
		t.Errorf("history = %s, want 12 points and a regression from run06 to run07", body)
	}

	wantError(t, srv, "/api/history", http.StatusBadRequest, "scenario is missing")
	wantError(t, srv, "/api/history?scenario=quick&metric=p98", http.StatusBadRequest, "metric:")
	wantError(t, srv, "/api/history?scenario=quick&metric=e2e-p99", http.StatusBadRequest, "is a cpload figure")
	wantError(t, srv, "/api/history?scenario=quick&by=branch", http.StatusBadRequest, "by:")
	wantError(t, srv, "/api/history?scenario=quick&qps=fast", http.StatusBadRequest, `qps="fast": want a whole number`)
	wantError(t, srv, "/api/history?scenario=quick&conn=-2", http.StatusBadRequest, `conn="-2"`)
	wantError(t, srv, "/api/history?scenario=quick&qps=500", http.StatusBadRequest, "500")
	wantError(t, srv, "/api/history?scenario=slow", http.StatusNotFound, `unknown scenario "slow"`)
}

// Two invocations are too few to look for change points: the points are
// answered, with detected false.
func TestHistoryOfTwoInvocations(t *testing.T) {
	srv := twoVersions(t)
	var a struct {
		Points   []struct{ Group string }
		Detected bool
	}
	getJSON(t, srv, "/api/history?scenario=quick", &a)
	if len(a.Points) != 2 || a.Points[0].Group != "1.0.0" || a.Points[1].Group != "1.1.0" || a.Detected {
		t.Errorf("history = %+v, want the two versions' points and detected false", a)
	}
}

func TestControlPlaneRuns(t *testing.T) {
	srv := twoVersions(t)
	var got []struct {
		Label, Shape string
		Proxies      int
		E2EP99Ms     *float64 `json:"e2e_p99_ms"`
		Pushes       *float64
		Report       map[string]any
		Provenance   results.Provenance
	}
	getJSON(t, srv, "/api/cpruns", &got)
	if len(got) != 1 || got[0].Label != "booklab-1" || got[0].Shape != "booklab" || got[0].Proxies != 100 ||
		got[0].E2EP99Ms == nil || *got[0].E2EP99Ms != 41.5 || got[0].Pushes != nil || got[0].Report["proxies"] != 100.0 ||
		got[0].Provenance.Meshperf.Version != "v0.9.0" {
		t.Errorf("cpruns = %+v", got)
	}
}

// A sweep's invocation answers its analysis beside its runs, unknown
// figures as null; an invocation that was no sweep has no sweep key.
func TestRunHasItsSweep(t *testing.T) {
	s := newSeededStore(t, invocationSpec{"1.0.0", 2}, invocationSpec{"1.1.0", 4})
	p99 := capacity.Objective{Percentile: 99, Limit: 5 * time.Millisecond}
	step := capacity.Step{Label: "run01_qps_1000_c_16_1024_both-sidecars", RequestedRPS: 1000, ActualRPS: 999.7,
		Latency:   []capacity.PercentileMS{{Percentile: 99, MS: 2.04}},
		Generator: capacity.Saturation{VCPU: 0.4, Cores: 8, SendDelayP99MS: 0.2},
		Server:    capacity.Saturation{VCPU: 0.3, Cores: 8, SendDelayP99MS: math.NaN()}}
	if err := s.st.InsertSweep(results.Sweep{RunID: "run01", Scenario: "quick", Analysis: capacity.Analysis{
		Objectives: capacity.Objectives{p99}, Baseline: results.ModeNoMesh, CPUs: 8,
		Curves: []capacity.Curve{{Mode: "both-sidecars", Steps: []capacity.Step{step},
			Judgements: []capacity.Judgement{{Verdict: capacity.WithinObjectives}}, StopReason: "end of range",
			Capacity: capacity.Capacity{Objective: "all", RPS: 999.7, LowerBound: true},
			Fits: []capacity.Fit{{Role: results.RoleClientSidecar, Kind: results.ProxySidecar, Metric: capacity.MetricVCPU,
				Intercept: 0.12, R2: math.NaN(), Points: 1, MinRPS: 999.7, MaxRPS: 999.7}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, s)
	var d struct {
		Sweep *struct {
			Objectives []struct {
				Percentile float64
				LimitNS    int64 `json:"limit_ns"`
			}
			Curves []struct {
				Mode  string
				Steps []struct {
					Server struct {
						SendDelayP99MS *float64 `json:"send_delay_p99_ms"`
					}
				}
				Capacity struct {
					RPS        float64
					LowerBound bool `json:"lower_bound"`
				}
				Fits []struct {
					R2     *float64
					MaxRPS float64 `json:"max_rps"`
				}
			}
		}
		Runs []struct {
			SendDelayP99MS *float64 `json:"send_delay_p99_ms"`
		}
	}
	getJSON(t, srv, "/api/runs/run01", &d)
	if d.Sweep == nil || len(d.Sweep.Curves) != 1 || len(d.Sweep.Objectives) != 1 || d.Sweep.Objectives[0].LimitNS != 5e6 {
		t.Fatalf("run01's sweep = %+v", d.Sweep)
	}
	c := d.Sweep.Curves[0]
	if c.Mode != "both-sidecars" || c.Capacity.RPS != 999.7 || !c.Capacity.LowerBound || len(c.Steps) != 1 ||
		c.Steps[0].Server.SendDelayP99MS != nil || len(c.Fits) != 1 || c.Fits[0].R2 != nil || c.Fits[0].MaxRPS != 999.7 {
		t.Errorf("run01's curve = %+v, want the stored one with the unknowns null", c)
	}
	if len(d.Runs) != 6 || d.Runs[0].SendDelayP99MS == nil || *d.Runs[0].SendDelayP99MS != 0.21 {
		t.Errorf("runs %+v, want 6 with their send delay, 0.21 ms", d.Runs)
	}
	// The run page renders the report with the sweep in its summary.
	if status, _, body := get(t, srv, "/runs/run01"); status != http.StatusOK {
		t.Errorf("GET /runs/run01 = %d %s", status, body)
	}
	_, _, raw := get(t, srv, "/api/runs/run02")
	var other map[string]json.RawMessage
	if err := json.Unmarshal(raw, &other); err != nil || other["runs"] == nil {
		t.Fatalf("run02 = %s, %v", raw, err)
	}
	if _, ok := other["sweep"]; ok {
		t.Errorf("run02, no sweep, has a sweep key: %s", other["sweep"])
	}
}
