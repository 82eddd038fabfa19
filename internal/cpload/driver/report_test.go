package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/testutil"
)

// The report is what `meshperf cpload run` and `cpload lab` print and write
// with --json; these tests feed the renderers fixed figures and pin their
// output with golden files (go test -update rewrites them).

// fullReport has every section: meshperf pilot started here with all four
// knobs, discoverySelectors, churn, scraped control-plane figures, the book's
// PromQL answers, procstat's process figures with the memory at sync,
// cpload's own cost and a note.
func fullReport() *driver.Report {
	return &driver.Report{
		Name: "booklab mesh-wide", Shape: "booklab",
		Started: time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC),
		Target:  "127.0.0.1:15010", Proxies: 13, Services: 16, Resources: 615,
		Scoping: driver.ScopeMeshWide, Exclude: []string{"istioinaction-excluded", "legacy"},
		Knobs: driver.Knobs{DebounceAfter: 2500 * time.Millisecond, DebounceMax: 10 * time.Second,
			PushThrottle: 100, MaxRequestsPerSecond: 25.5},
		Connect: driver.ConnectFigures{AllConnected: 41.25, AllSynced: 212.5,
			FirstConfig: driver.Percentiles{N: 13, P50: 35.5, P90: 80, P99: 150.25, Max: 151}},
		ConfigSize: driver.ConfigSizeFigures{SidecarMean: 530_000, SidecarMax: 2_400_000,
			ByTypeMean: map[string]float64{"cds": 300_000, "eds": 120_000, "lds": 90_000, "rds": 19_000, "sds": 1000, "unused": 0},
			Workload:   "catalog-6d5c4b.istioinaction", WorkloadBytes: 2_300_000, WorkloadDumpBytes: 2_411_724},
		Churn: &driver.ChurnFigures{Kind: driver.ChurnPerfTest, Changes: 10, DurationMs: 25_300,
			EndToEnd:  driver.Percentiles{N: 120, P50: 2600, P90: 2750.5, P99: 2999, Max: 12_345},
			PerChange: driver.Percentiles{N: 10, P50: 2650, P99: 3010}, Expected: 120, Missed: 1,
			ApplyMaxMs: 8.25, LagMaxMs: 0.5},
		ControlPlane: &driver.ControlPlaneFigures{Pushes: 70, Rejects: 2,
			PushesByType: map[string]float64{"cds": 30, "eds": 20, "lds": 10, "rds": 10},
			Convergence:  driver.Percentiles{N: 70, P50: 2.5, P90: 5, P99: 99.95}},
		Prometheus: &driver.PromFigures{PushCount: 70, P50: 2.5, P90: 5, P99: 100,
			Queries: []string{"sum(pilot_xds_pushes)", "histogram_quantile(0.99, ...)"}},
		Process: &driver.ProcessFigures{Source: "procstat", CPUSeconds: 12.345, ChurnCPU: 3.2, ConnectCPU: 6.1, RSSMaxMB: 180.4,
			PeakRSSMB: 190.6, RSSAtEndMB: 175, SamplesInTest: 25, RSSAtSyncMB: 150, KBPerProxyAtSync: 11815.4, KBPerServiceAtSync: 9600},
		Simulator: &driver.SimulatorFigures{CPUSeconds: 1.5, RSSMaxMB: 40.2, KBPerProxy: 3166.5},
		Notes:     []string{"no proxy imports the changed namespace: nothing to time end to end"},
	}
}

// externalReport is a test against a control plane meshperf did not start,
// with only its /metrics: no knobs, no name, figures of no observations
// (NaN), and the process figures scraped.
func externalReport() *driver.Report {
	return &driver.Report{
		Shape: "uniform", Target: "istiod.istio-system:15010", External: true, Delta: true,
		Proxies: 200, Services: 50, Resources: 60, Scoping: driver.ScopeNone,
		Connect: driver.ConnectFigures{AllConnected: 900, AllSynced: 15_000,
			FirstConfig: driver.Percentiles{N: 200, P50: 99.94, P99: 14_000}},
		ConfigSize: driver.ConfigSizeFigures{SidecarMean: 900, SidecarMax: 1023, ByTypeMean: map[string]float64{"cds": 900}},
		Churn: &driver.ChurnFigures{Kind: driver.ChurnEndpoints, Changes: 0,
			EndToEnd:  driver.Percentiles{P50: math.NaN(), P90: math.NaN(), P99: math.NaN(), Max: math.NaN()},
			PerChange: driver.Percentiles{P50: math.NaN(), P99: math.NaN()}},
		Process: &driver.ProcessFigures{Source: "metrics", CPUSeconds: 40, ChurnCPU: 0.25, ConnectCPU: 21.5, RSSAtEndMB: 512.5},
		Notes:   []string{"external control plane: knobs were not set by meshperf"},
	}
}

func TestReportPrint(t *testing.T) {
	for name, r := range map[string]*driver.Report{"full": fullReport(), "external": externalReport()} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			r.Print(&out)
			testutil.Golden(t, filepath.Join("testdata", "report-"+name+".txt"), out.Bytes())
		})
	}
}

// TestReportJSON pins the field names --json writes and the results store
// keeps (cp_runs' report column), the same way the CLI encodes them.
func TestReportJSON(t *testing.T) {
	b, err := json.MarshalIndent(fullReport(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "report-full.json"), append(b, '\n'))
}

// TestLabReportPrint pins the lab's table: four steps beside the book's
// figures, one without scraped figures and one whose changes reached no
// proxy (shown as n/a).
func TestLabReportPrint(t *testing.T) {
	// A negative figure stands for one that is missing.
	step := func(pushes float64, conv, e2e float64, xds, dump int64) *driver.Report {
		r := &driver.Report{ConfigSize: driver.ConfigSizeFigures{WorkloadBytes: xds, WorkloadDumpBytes: dump}}
		if pushes >= 0 {
			r.ControlPlane = &driver.ControlPlaneFigures{Pushes: pushes, Convergence: driver.Percentiles{N: 10, P99: conv}}
		}
		r.Churn = &driver.ChurnFigures{}
		if e2e >= 0 {
			r.Churn.EndToEnd = driver.Percentiles{N: 12, P99: e2e}
		}
		return r
	}
	lr := &driver.LabReport{
		Steps: []driver.LabStep{
			{Name: "1. lab mesh (615 resources)", Report: step(520, 180.5, 2700, 2_300_000, 2_411_724), BookPushes: 514, BookSize: "2.3 MB"},
			{Name: "2. mesh-wide Sidecar", Report: step(71, 12.25, 2650, 520_000, 0), BookPushes: 70, BookSize: "516 KB"},
			{Name: "3. PILOT_DEBOUNCE_AFTER=2.5s", Report: step(-1, 0, 2600, 520_000, 0), BookPushes: 63},
			{Name: "4. discoverySelectors exclude istioinaction-excluded", Report: step(0, 0, -1, 520_000, 0)},
		},
		PushReduction: 520.0 / 71, SizeReduction: 2_411_724.0 / 520_000,
	}
	var out bytes.Buffer
	lr.Print(&out)
	testutil.Golden(t, filepath.Join("testdata", "lab.txt"), out.Bytes())
}

// TestStoreRow: the stored row carries the report's JSON, and a report that
// cannot be written as JSON is refused rather than stored without it.
func TestStoreRow(t *testing.T) {
	row, err := fullReport().StoreRow()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(row.ReportJSON), &back); err != nil || back["knobs"].(map[string]any)["debounceAfter"] != "2.5s" {
		t.Errorf("stored report JSON %.200q (%v), want the report with its knobs as durations", row.ReportJSON, err)
	}
	bad := fullReport()
	bad.ControlPlane.Pushes = math.NaN()
	if _, err := bad.StoreRow(); err == nil {
		t.Error("a report with a NaN figure was stored")
	}
}

// A run reports cpload's own cost beside the control plane's, and the
// control plane's memory at sync shared out per proxy and per service.
func TestRunReportsSimulatorCost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: m, Churn: driver.ChurnNone,
		PilotCommand: pilotCommand(t), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Simulator
	if s == nil || s.RSSMaxMB <= 0 || s.CPUSeconds <= 0 {
		t.Fatalf("simulator figures %+v; want cpload's CPU and RSS", s)
	}
	if want := s.RSSMaxMB * 1024 / float64(r.Proxies); math.Abs(s.KBPerProxy-want) > 1e-6*want {
		t.Errorf("simulator KB per proxy %v; want RSS max over %d proxies, %v", s.KBPerProxy, r.Proxies, want)
	}
	p := r.Process
	if p == nil || p.Source != "procstat" || p.RSSAtSyncMB <= 0 || p.RSSAtSyncMB > p.RSSMaxMB {
		t.Fatalf("control plane figures %+v; want its RSS at sync, at most its RSS max", p)
	}
	if want := p.RSSAtSyncMB * 1024 / float64(r.Services); math.Abs(p.KBPerServiceAtSync-want) > 1e-6*want {
		t.Errorf("control plane KB per service %v; want RSS at sync over %d services, %v", p.KBPerServiceAtSync, r.Services, want)
	}
	if want := p.RSSAtSyncMB * 1024 / float64(r.Proxies); math.Abs(p.KBPerProxyAtSync-want) > 1e-6*want {
		t.Errorf("control plane KB per proxy %v; want RSS at sync over %d proxies, %v", p.KBPerProxyAtSync, r.Proxies, want)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "simulator (cpload): CPU ") || !strings.Contains(out.String(), "control plane memory at sync: RSS ") {
		t.Errorf("the printed report lacks the simulator's cost or the memory at sync:\n%s", out.String())
	}
}
