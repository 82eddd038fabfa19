package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// labRun is a run as the lab stores it: both sidecars with mTLS at 1000
// qps over 16 connections, its processes measured, its provenance filled,
// its Fortio JSON at fortioPath ("" for none).
func labRun(mode string, fortioPath string) results.Run {
	nan := math.NaN()
	r := results.Run{
		RunID: "a1b2c3", Label: "a1b2c3_qps_1000_c_16_1024_both", Scenario: "istio-1.24", Mode: mode,
		Protocol: "http", Repetition: 2, Connections: 16, RequestedQPS: 1000, ActualQPS: 999.8,
		Duration: 30 * time.Second, PayloadSize: 1024, ResponseSize: 1142, MTLS: true,
		StartTime: time.Date(2026, 11, 21, 13, 21, 11, 317966000, time.UTC), Network: "netns",
		Latency: results.Latency{Min: 0.09, Max: 9.5, Avg: 0.81, P50: 0.7, P75: 0.85, P90: 1.1, P99: 2.6,
			P999: 4.2, P9999: 8.8},
		Corrected: true, Calls: 29994, Errors: 3, ErrorPercent: 100 * 3 / 29994.0,
		Codes:      map[string]int64{"200": 29991, "503": 3},
		FortioJSON: fortioPath,
		Processes: []results.Process{
			{Role: results.RoleClientSidecar, PID: 101, VCPU: 0.121, RSSMB: 10.8, PSSMB: nan, MaxRSSMB: 11.2},
			{Role: results.RoleServerSidecar, PID: 102, VCPU: 0.117, RSSMB: 11.0, PSSMB: nan, MaxRSSMB: 11.5},
			{Role: results.RoleClientApp, PID: 103, VCPU: 0.35, RSSMB: 20.5, PSSMB: nan, MaxRSSMB: 21},
			{Role: results.RoleServerApp, PID: 104, VCPU: 0.2, RSSMB: 8.25, PSSMB: nan, MaxRSSMB: 9},
		},
		Provenance: results.Provenance{
			Meshperf:     results.Build{Version: "v0.9.0", Commit: "1e81577c0ffe"},
			DataPlane:    results.Component{Name: "meshperf-proxy", Version: "v0.9.0", Commit: "1e81577c0ffe"},
			ControlPlane: results.Component{Name: "meshperf-pilot", Version: "v0.9.0", Commit: "1e81577c0ffe"},
			ParamsHash:   "9f3c2a",
			Labels:       "nightly",
			Machine: results.Machine{Hostname: "lab1", CPUs: 2, CPUModel: "Intel(R) Xeon(R) CPU @ 2.20GHz",
				MemoryMB: 23 * 1024, Kernel: "Linux 6.18.0"},
		},
	}
	// The spectrum: straight lines through the latency figures above.
	anchors := []results.PercentileValue{{Percentile: 50, Ms: 0.7}, {Percentile: 75, Ms: 0.85},
		{Percentile: 90, Ms: 1.1}, {Percentile: 99, Ms: 2.6}, {Percentile: 99.9, Ms: 4.2}, {Percentile: 99.99, Ms: 8.8}}
	for _, p := range results.SpectrumPercentiles {
		i := max(1, slices.IndexFunc(anchors, func(a results.PercentileValue) bool { return a.Percentile >= p }))
		lo, hi := anchors[i-1], anchors[i]
		ms := lo.Ms + (hi.Ms-lo.Ms)*(p-lo.Percentile)/(hi.Percentile-lo.Percentile)
		r.Spectrum = append(r.Spectrum, results.PercentileValue{Percentile: p, Ms: ms})
	}
	if mode == "no-mesh" {
		r.Processes, r.MTLS, r.Label = r.Processes[2:], false, "a1b2c3_qps_1000_c_16_1024_baseline"
		r.Provenance.DataPlane, r.Provenance.ControlPlane = results.Component{}, results.Component{}
	}
	return r
}

// nighthawkFile is a result in the shape of Nighthawk's --output-format
// fortio, written by hand (results' reader test uses it too).
const nighthawkFile = "../results/testdata/nighthawk-fortio.json"

// importedRun is a run as import stores a Nighthawk result: no processes,
// the mesh the user named, no machine.
func importedRun(t *testing.T) results.Run {
	t.Helper()
	r, err := results.ReadFortioFile(nighthawkFile)
	if err != nil {
		t.Fatal(err)
	}
	r.RunID, r.Scenario, r.Mode, r.Repetition = "f00d01", DefaultScenario, UnknownMode, 1
	r.Provenance.DataPlane = results.Component{Name: "istio", Version: "1.24.2"}
	r.Provenance.ControlPlane = r.Provenance.DataPlane
	return r
}

// storedRuns puts the runs into a new store and reads them back, so that
// the tests export what the store keeps, not what the test built.
func storedRuns(t *testing.T, runs ...results.Run) []results.Run {
	t.Helper()
	store, err := results.Open(filepath.Join(t.TempDir(), "meshperf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, r := range runs {
		if err := store.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.Runs(results.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(runs) {
		t.Fatalf("store gave back %d runs, want %d", len(got), len(runs))
	}
	return got
}

func TestSMPFieldsOfAStoredRun(t *testing.T) {
	runs := storedRuns(t, labRun("both-sidecars", "/var/lib/meshperf/a1b2c3/both.json"), labRun("no-mesh", ""))
	var buf bytes.Buffer
	if err := WriteSMP(&buf, runs); err != nil {
		t.Fatal(err)
	}
	// Read back as generic JSON: the test checks the names on the wire,
	// not the Go structs' idea of them.
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.String())
	}
	if keys := slices.Sorted(maps.Keys(doc)); !slices.Equal(keys, []string{"environmentConfigs", "performanceTestConfig",
		"performanceTestResults", "serviceMeshConfigs"}) {
		t.Fatalf("document keys %v", keys)
	}
	cfg := doc["performanceTestConfig"].(map[string]any)
	want(t, cfg, "smpVersion", SMPVersion)
	want(t, cfg, "id", "meshperf/a1b2c3")
	want(t, cfg, "name", "istio-1.24")
	want(t, cfg, "duration", "30s")
	clients := cfg["clients"].([]any)
	if len(clients) != 1 {
		t.Fatalf("clients %v, want the one load configuration both runs share", clients)
	}
	c := clients[0].(map[string]any)
	want(t, c, "loadGenerator", "meshperf")
	want(t, c, "protocol", "PROTOCOL_HTTP")
	want(t, c, "connections", 16.0)
	want(t, c, "rps", "1000") // int64: a string

	results := doc["performanceTestResults"].([]any)
	meshes := doc["serviceMeshConfigs"].([]any)
	envs := doc["environmentConfigs"].([]any)
	if len(results) != 2 || len(meshes) != 2 || len(envs) != 1 {
		t.Fatalf("%d results, %d mesh configs, %d environments; want 2, 2, 1", len(results), len(meshes), len(envs))
	}
	res := results[0].(map[string]any)
	want(t, res, "id", "a1b2c3/both-sidecars/qps-1000/c-16/rep-2")
	want(t, res, "startTime", "2026-11-21T13:21:11.317966Z")
	want(t, res, "endTime", "2026-11-21T13:21:41.317966Z")
	want(t, res, "actualQps", 999.8)
	want(t, res, "detailsUri", "file:///var/lib/meshperf/a1b2c3/both.json")
	want(t, res, "testId", "meshperf/a1b2c3")
	want(t, res, "meshConfigId", "a1b2c3/both-sidecars/qps-1000/c-16/rep-2/mesh")
	env := envs[0].(map[string]any)
	want(t, res, "envId", env["id"])
	lat := res["latenciesMs"].(map[string]any)
	for k, v := range map[string]float64{"min": 0.09, "average": 0.81, "p50": 0.7, "p90": 1.1, "p99": 2.6, "max": 9.5} {
		want(t, lat, k, v)
	}
	labels := res["labels"].(map[string]any)
	for k, v := range map[string]string{"mode": "both-sidecars", "errors": "3", "p9999_ms": "8.8",
		"client-app_cpu_mcores": "350", "meshperf_commit": "1e81577c0ffe", "labels": "nightly", "requested_qps": "1000"} {
		want(t, labels, k, v)
	}

	mesh := meshes[0].(map[string]any)
	want(t, mesh, "mtlsEnabled", true)
	want(t, mesh, "meshBuild", "meshperf-pilot v0.9.0 (commit 1e81577c0ffe)")
	want(t, mesh, "proxyBuild", "meshperf-proxy v0.9.0 (commit 1e81577c0ffe)")
	want(t, mesh["meshType"].(map[string]any), "type", "ISTIO")
	sidecar := mesh["sidecar"].(map[string]any)
	want(t, sidecar, "count", 2.0)
	want(t, sidecar, "cpuMcores", 238.0) // 121 + 117
	want(t, sidecar, "memMb", 22.0)      // 10.8 + 11.0, rounded
	want(t, sidecar, "rps", 1000.0)
	// The no-mesh run: no sidecar, no mesh, no mTLS (fields at their zero
	// value are left out, as protobuf's JSON does).
	bare := meshes[1].(map[string]any)
	for _, k := range []string{"sidecar", "meshType", "mtlsEnabled", "meshBuild", "meshControlPlane"} {
		if v, ok := bare[k]; ok {
			t.Errorf("no-mesh mesh config has %s = %v", k, v)
		}
	}

	node := env["nodes"].([]any)[0].(map[string]any)
	want(t, node, "type", "Intel(R) Xeon(R) CPU @ 2.20GHz")
	want(t, node, "cores", 2.0)
	want(t, node, "memMb", "23552")
	want(t, env["labels"].(map[string]any), "kernel", "Linux 6.18.0")
}

// The fortio format gives back the run's own file when it is there, and
// otherwise a rebuilt one that reads back as the same run.
func TestFortioJSONOfAStoredRun(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own.json")
	original := []byte(`{"RunType":"HTTP","Labels":"own","StartTime":"2026-11-21T13:21:11Z","RequestedQPS":"100",` +
		`"ActualQPS":100,"ActualDuration":1000000000,"NumThreads":1,"DurationHistogram":{"Count":100,"Min":0.001,"Max":0.002,"Avg":0.0015}}`)
	if err := os.WriteFile(own, original, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := storedRuns(t, labRun("both-sidecars", own), labRun("both-sidecars", filepath.Join(dir, "gone.json")))

	got, rebuilt, err := FortioJSON(runs[0])
	if err != nil || rebuilt || !bytes.Equal(got, original) {
		t.Errorf("with its file there: rebuilt %v, err %v, JSON %s", rebuilt, err, got)
	}

	data, rebuilt, err := FortioJSON(runs[1])
	if err != nil || !rebuilt {
		t.Fatalf("without its file: rebuilt %v, err %v", rebuilt, err)
	}
	var marker struct{ Rebuilt string }
	if err := json.Unmarshal(data, &marker); err != nil || marker.Rebuilt != RebuiltNote {
		t.Errorf("rebuilt JSON not marked: %q (%v)", marker.Rebuilt, err)
	}
	back, err := results.FromFortioJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[1]
	if back.Label != r.Label || !back.StartTime.Equal(r.StartTime) || back.RequestedQPS != r.RequestedQPS ||
		back.ActualQPS != r.ActualQPS || back.Duration != r.Duration || back.Connections != r.Connections ||
		back.Calls != r.Calls || back.Errors != r.Errors || back.Corrected != r.Corrected ||
		back.ResponseSize != r.ResponseSize || back.Provenance != r.Provenance {
		t.Errorf("round trip lost figures:\n got %+v\nwant %+v", back, r)
	}
	for name, pair := range map[string][2]float64{
		"min": {back.Latency.Min, r.Latency.Min}, "max": {back.Latency.Max, r.Latency.Max},
		"avg": {back.Latency.Avg, r.Latency.Avg}, "p50": {back.Latency.P50, r.Latency.P50},
		"p75": {back.Latency.P75, r.Latency.P75}, "p90": {back.Latency.P90, r.Latency.P90},
		"p99": {back.Latency.P99, r.Latency.P99}, "p99.9": {back.Latency.P999, r.Latency.P999},
		"p99.99": {back.Latency.P9999, r.Latency.P9999},
	} {
		if math.Abs(pair[0]-pair[1]) > 1e-9 {
			t.Errorf("%s: %v ms after the round trip, %v stored", name, pair[0], pair[1])
		}
	}
	if len(back.Spectrum) != len(r.Spectrum) {
		t.Errorf("spectrum of %d points, want %d", len(back.Spectrum), len(r.Spectrum))
	}
}

func TestIstioCSVOfAStoredRun(t *testing.T) {
	runs := storedRuns(t, labRun("both-sidecars", ""))
	var buf bytes.Buffer
	if err := results.WriteCSV(&buf, runs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
	header, row := rows[0], rows[1]
	if !slices.Equal(header[:len(results.IstioColumns)], results.IstioColumns) {
		t.Errorf("header does not start with Istio's columns: %v", header)
	}
	col := func(name string) string { return row[slices.Index(header, name)] }
	for name, v := range map[string]string{"Labels": "a1b2c3_qps_1000_c_16_1024_both", "RequestedQPS": "1000",
		"NumThreads": "16", "p50": "700", "p99": "2600", "cpu_mili_avg_istio_proxy_fortioclient": "121",
		"mode": "both-sidecars", "run_id": "a1b2c3"} {
		if got := col(name); got != v {
			t.Errorf("column %s = %q, want %q", name, got, v)
		}
	}
}

func want(t *testing.T, m map[string]any, key string, value any) {
	t.Helper()
	if got, ok := m[key]; !ok || got != value {
		t.Errorf("%s = %v (%T), want %v (%T)", key, got, got, value, value)
	}
}

// A run stored with its histogram (schema 5) is rebuilt with the load
// generator's own buckets, from the store alone.
func TestRebuiltFortioJSONKeepsTheStoredHistogram(t *testing.T) {
	r := labRun("both-sidecars", filepath.Join(t.TempDir(), "gone.json"))
	r.Histogram = []results.HistogramBucket{{StartMs: r.Latency.Min, EndMs: r.Latency.P50, Count: r.Calls / 2},
		{StartMs: r.Latency.P50, EndMs: r.Latency.Max, Count: r.Calls - r.Calls/2}}
	data, err := RebuiltFortioJSON(storedRuns(t, r)[0])
	if err != nil {
		t.Fatal(err)
	}
	back, err := results.FromFortioJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Histogram) != 2 || back.Histogram[1] != r.Histogram[1] || back.Calls != r.Calls ||
		math.Abs(back.Latency.P99-r.Latency.P99) > 1e-9 || math.Abs(back.Latency.P75-r.Latency.P75) > 1e-9 {
		t.Errorf("round trip: histogram %+v, latency %+v; stored %+v, %+v", back.Histogram, back.Latency, r.Histogram, r.Latency)
	}
	if !bytes.Contains(data, []byte(RebuiltFromHistogramNote)) {
		t.Errorf("not marked as rebuilt from the stored histogram: %s", data)
	}
}
