package results

import (
	"testing"
	"time"
)

func TestControlPlaneRunsRoundTrip(t *testing.T) { forEachDialect(t, testControlPlaneRunsRoundTrip) }

func testControlPlaneRunsRoundTrip(t *testing.T, db string, _ conn) {
	st := openStore(t, db)
	p99 := 123.5
	pushes := 70.0
	start := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	rss := 48.25
	in := ControlPlaneRun{Label: "mesh-wide", Shape: "booklab", Start: start, Target: "127.0.0.1:15010", Delta: true, Proxies: 13,
		Services: 7, Sidecar: "namespace", Churn: "endpoints", Changes: 10, Missed: 1,
		Pushes: &pushes, E2EP99: &p99, E2EMax: &p99, RSSMaxMB: &rss, ReportJSON: `{}`, Provenance: sampleProvenance()}
	if err := st.InsertControlPlaneRun(in); err != nil {
		t.Fatal(err)
	}
	runs, err := st.ControlPlaneRuns()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Label != "mesh-wide" || *runs[0].Pushes != 70 || *runs[0].E2EP99 != 123.5 ||
		runs[0].ConvergenceP99 != nil || !runs[0].Start.Equal(start) || runs[0].Provenance != sampleProvenance() {
		t.Fatalf("read back %+v", runs)
	}
	got := runs[0]
	if got.Target != in.Target || !got.Delta || got.External || got.Services != 7 || got.Sidecar != "namespace" ||
		got.Churn != "endpoints" || got.Missed != 1 || *got.E2EMax != p99 || *got.RSSMaxMB != rss || got.CPUSeconds != nil {
		t.Errorf("every column read back: %+v", got)
	}
}
