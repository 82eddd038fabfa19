package driver_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// The test binary doubles as meshperf pilot: the driver runs it as its
// subprocess with this variable set.
const pilotEnv = "MESHPERF_CPLOAD_TEST_PILOT"

func TestMain(m *testing.M) {
	if os.Getenv(pilotEnv) == "1" {
		os.Exit(cli.Pilot(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(kubetest.Main(m))
}

func pilotCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pilotEnv, "1")
	return []string{exe, "pilot"}
}

// TestLabScopingCutsPushes runs a short lab (3 repetitions, 13 proxies,
// the book's mesh without the 600 extras to stay quick) against meshperf
// pilot: every proxy must converge in every step, the mesh-wide Sidecar
// must cut pushes (sidecars no longer import istioinaction, only the
// ingress gateway is pushed) and the catalog's config size, and the
// excluded namespace's changes must push nothing.
func TestLabScopingCutsPushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var progress bytes.Buffer
	lr, err := driver.Lab(ctx, driver.LabConfig{Reps: 3, Delay: 50 * time.Millisecond, DebounceAfter: 300 * time.Millisecond,
		NoExtra: true, PilotCommand: pilotCommand(t), Timeout: 20 * time.Second, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(lr.Steps) != 4 {
		t.Fatalf("%d steps, want 4", len(lr.Steps))
	}
	for _, s := range lr.Steps {
		r := s.Report
		if r.Connect.AllSynced <= 0 || r.ControlPlane == nil || r.Churn == nil {
			t.Fatalf("%s: incomplete report %+v", s.Name, r)
		}
		if r.Churn.Missed != 0 {
			t.Errorf("%s: %d deliveries missed", s.Name, r.Churn.Missed)
		}
		if r.Knobs.MaxRequestsPerSecond != float64(r.Proxies) {
			t.Errorf("%s: PILOT_MAX_REQUESTS_PER_SECOND %v, want the fleet's %d proxies admitted within a second", s.Name, r.Knobs.MaxRequestsPerSecond, r.Proxies)
		}
	}
	base, scoped, excluded := lr.Steps[0].Report, lr.Steps[1].Report, lr.Steps[3].Report
	if base.Churn.EndToEnd.N != 3*12 { // 11 sidecars' cluster + the ingress gateway's virtual host
		t.Errorf("baseline: %d deliveries, want 36", base.Churn.EndToEnd.N)
	}
	if scoped.Churn.EndToEnd.N != 3 { // only the ingress gateway
		t.Errorf("mesh-wide Sidecar: %d deliveries, want 3", scoped.Churn.EndToEnd.N)
	}
	if lr.PushReduction < 3 {
		t.Errorf("pushes %v -> %v: reduction %.1fx, want at least 3x", base.ControlPlane.Pushes, scoped.ControlPlane.Pushes, lr.PushReduction)
	}
	if lr.SizeReduction <= 1 {
		t.Errorf("catalog config %d -> %d bytes: no reduction", base.ConfigSize.WorkloadBytes, scoped.ConfigSize.WorkloadBytes)
	}
	if excluded.ControlPlane.Pushes != 0 {
		t.Errorf("changes in a namespace discoverySelectors exclude pushed %v times", excluded.ControlPlane.Pushes)
	}
	var out bytes.Buffer
	lr.Print(&out)
	if lines := strings.Count(out.String(), "\n"); lines != len(lr.Steps)+4 {
		t.Errorf("the lab's table has %d lines, want a header, %d steps and 3 lines of notes:\n%s", lines, len(lr.Steps), out.String())
	}
}

// TestPrometheusMatchesScrape runs a short test with --prometheus: the
// book's PromQL push count must equal the directly scraped delta, and its
// P99 must be in the same range as the scraped histogram's.
func TestPrometheusMatchesScrape(t *testing.T) {
	testenv.NeedCommand(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := shape.BookLab(shape.BookLabOptions{NoExtra: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.Run(ctx, driver.Config{Shape: "booklab", Mesh: m, Churn: driver.ChurnPerfTest, Namespace: shape.BookNamespace,
		Reps: 3, Delay: 100 * time.Millisecond, Prometheus: true, PromInterval: 200 * time.Millisecond,
		PilotCommand: pilotCommand(t), ConnectRate: -1, Timeout: 20 * time.Second, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if r.Prometheus == nil || r.ControlPlane == nil {
		t.Fatalf("missing figures: prometheus %+v, scraped %+v, notes %v", r.Prometheus, r.ControlPlane, r.Notes)
	}
	if r.Prometheus.PushCount != r.ControlPlane.Pushes || r.ControlPlane.Pushes == 0 {
		t.Errorf("PromQL push count %v, scraped %v", r.Prometheus.PushCount, r.ControlPlane.Pushes)
	}
	// PromQL's window is the last minute, the scrape's the test: both hold
	// the same pushes here, but rate() extrapolates, so allow some slack.
	if p, s := r.Prometheus.P99, r.ControlPlane.Convergence.P99; s == 0 || math.Abs(p-s) > 0.5*s {
		t.Errorf("PromQL P99 %.1fms, scraped P99 %.1fms", p, s)
	}
}

// A run's report and its stored cp_runs row carry its provenance: meshperf
// pilot started here as the control plane, no data plane, the labels.
func TestRunStoresProvenance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 1, ServicesPerNamespace: 2, Replicas: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.Run(ctx, driver.Config{Name: "prov", Shape: "uniform", Mesh: m, Churn: driver.ChurnNone, Labels: "baseline a",
		PilotCommand: pilotCommand(t), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	row, err := r.StoreRow()
	if err != nil {
		t.Fatal(err)
	}
	st, err := results.Open(filepath.Join(t.TempDir(), "meshperf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.InsertControlPlaneRun(row); err != nil {
		t.Fatal(err)
	}
	rows, err := st.ControlPlaneRuns()
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	p := rows[0].Provenance
	if p.ControlPlane != results.ThisBuild().Component("meshperf-pilot") || p.DataPlane.Name != "" || p.Labels != "baseline a" ||
		p.ParamsHash == "" || !p.Machine.SameAs(results.LocalMachine()) || p.Meshperf.Version == "" {
		t.Errorf("stored provenance %+v", p)
	}
	if !strings.Contains(rows[0].ReportJSON, `"provenance":{"meshperf":`) {
		t.Errorf("the stored report has no provenance: %s", rows[0].ReportJSON)
	}
}
