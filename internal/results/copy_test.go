package results

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

// Copying moves every run, with its processes, percentiles and provenance,
// every sweep's analysis and every control-plane run, in either direction; a second copy skips
// what the destination holds, and a later one adds only what is new.
func TestCopyBothWaysIdempotent(t *testing.T) {
	sqliteDialect, pgDialect := storeDialects[0], storeDialects[1]
	for _, c := range []struct {
		name     string
		src, dst func(testing.TB) string
	}{
		{"sqlite-to-postgres", sqliteDialect.newDB, pgDialect.newDB},
		{"postgres-to-sqlite", pgDialect.newDB, sqliteDialect.newDB},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dst := openStore(t, c.src(t)), openStore(t, c.dst(t))
			t0 := time.Date(2026, 10, 1, 8, 0, 0, 987654321, time.UTC)
			failed := sampleRun("r2", "latency", t0.Add(time.Hour))
			failed.Failed, failed.FailureReason, failed.Processes, failed.Spectrum = true, "sidecar exited", nil, nil
			for _, r := range []Run{sampleRun("r1", "latency", t0), failed} {
				if err := src.Insert(r); err != nil {
					t.Fatal(err)
				}
			}
			cp := sampleControlPlaneRun(t0)
			if err := src.InsertControlPlaneRun(cp); err != nil {
				t.Fatal(err)
			}
			if err := src.InsertSweep(sampleSweep("r1")); err != nil {
				t.Fatal(err)
			}

			n, err := Copy(dst, src)
			if want := (Copied{Runs: 2, Sweeps: 1, ControlPlaneRuns: 1}); err != nil || n != want {
				t.Fatalf("first copy: %+v, %v; want %+v", n, err, want)
			}
			assertSameStores(t, dst, src)

			n, err = Copy(dst, src)
			if want := (Copied{RunsSkipped: 2, SweepsSkipped: 1, ControlPlaneRunsSkipped: 1}); err != nil || n != want {
				t.Fatalf("second copy: %+v, %v; want %+v (nothing new)", n, err, want)
			}
			assertSameStores(t, dst, src)

			// A run of the same invocation with the same label but a later
			// start is another run.
			again := sampleRun("r1", "latency", t0.Add(2*time.Hour))
			if err := src.Insert(again); err != nil {
				t.Fatal(err)
			}
			n, err = Copy(dst, src)
			if want := (Copied{Runs: 1, RunsSkipped: 2, SweepsSkipped: 1, ControlPlaneRunsSkipped: 1}); err != nil || n != want {
				t.Fatalf("third copy: %+v, %v; want %+v", n, err, want)
			}
			assertSameStores(t, dst, src)
			if counts, err := dst.Count(); err != nil || counts != (Counts{Runs: 3, Invocations: 2, ControlPlaneRuns: 1}) {
				t.Errorf("destination counts %+v, %v", counts, err)
			}
		})
	}
}

// A copy that fails part way (here: the destination's user may write runs
// but not their processes) leaves the destination as it was.
func TestCopyAllOrNothing(t *testing.T) {
	src := openStore(t, storeDialects[0].newDB(t))
	t0 := time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)
	noProcesses := sampleRun("r1", "latency", t0)
	noProcesses.Processes = nil
	for _, r := range []Run{noProcesses, sampleRun("r2", "latency", t0.Add(time.Hour))} {
		if err := src.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	db := pgtest.NewDatabase(t)
	openStore(t, db).Close()
	dst := openStore(t, pgRole(t, db, "schema_version, runs, run_percentiles, run_histogram, run_prometheus, cp_runs"))
	if _, err := Copy(dst, src); err == nil || !strings.Contains(err.Error(), "permission denied for table processes") {
		t.Fatalf("Copy = %v, want refused at r2's processes", err)
	}
	if n, err := dst.Count(); err != nil || n != (Counts{}) {
		t.Errorf("after the failed copy the destination holds %+v, %v; want nothing (r1 rolled back)", n, err)
	}
}

func sampleControlPlaneRun(start time.Time) ControlPlaneRun {
	f := func(v float64) *float64 { return &v }
	return ControlPlaneRun{Label: "mesh-wide", Shape: "booklab", Target: "127.0.0.1:15010", Sidecar: "none", Churn: "endpoints",
		Start: start, Delta: true, Proxies: 13, Services: 5, Changes: 10, Missed: 1,
		Pushes: f(70), ConvergenceP50: f(1.5), ConvergenceP90: f(2.5), ConvergenceP99: f(3.5),
		E2EP50: f(10), E2EP90: f(20), E2EP99: f(30), E2EMax: f(40), AllSyncedMs: f(50),
		ConfigBytesMean: f(1234.5), CPUSeconds: f(0.75), RSSMaxMB: f(88), ReportJSON: `{"shape":"booklab"}`,
		Provenance: sampleProvenance()}
}

func assertSameStores(t *testing.T, got, want *Store) {
	t.Helper()
	gr, err := got.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := want.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gr) != len(wr) {
		t.Fatalf("%d runs in %s, %d in %s", len(gr), got, len(wr), want)
	}
	for i := range wr {
		if !sameRun(gr[i], wr[i]) {
			t.Errorf("run %d\n got %+v\nwant %+v", i, gr[i], wr[i])
		}
	}
	gs, err := got.Sweeps()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := want.Sweeps()
	if err != nil {
		t.Fatal(err)
	}
	if !sameNaN(gs, ws) {
		t.Errorf("sweeps\n got %+v\nwant %+v", gs, ws)
	}
	gc, err := got.ControlPlaneRuns()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := want.ControlPlaneRuns()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gc, wc) {
		t.Errorf("control-plane runs\n got %+v\nwant %+v", gc, wc)
	}
}
