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
	if err := st.InsertControlPlaneRun(ControlPlaneRun{Label: "mesh-wide", Shape: "booklab", Start: start, Proxies: 13, Changes: 10,
		Pushes: &pushes, E2EP99: &p99, ReportJSON: `{}`, Provenance: sampleProvenance()}); err != nil {
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
}
