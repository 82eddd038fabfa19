package bench_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/history"
	"github.com/meshperf/meshperf/internal/results"
)

// The test binary doubles as meshperf pilot: the benchmark runs it as its
// control plane with this variable set.
const pilotEnv = "MESHPERF_BENCH_TEST_PILOT"

func TestMain(m *testing.M) {
	if os.Getenv(pilotEnv) == "1" {
		os.Exit(cli.Pilot(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestRunPilotSplitsEveryDeliveryByStage runs the benchmark small against
// meshperf pilot: every client must get every change, every delivery must
// be split into stages that add up to its end to end, and the runs must
// be stored so that history follows them.
func TestRunPilotSplitsEveryDeliveryByStage(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pilotEnv, "1")
	const clients, changes = 4, 3
	c := bench.PilotConfig{Clients: clients, Changes: changes, Spacing: 400 * time.Millisecond, Repeats: 2,
		Meshperf: []string{exe, "pilot"}, DebounceAfter: 100 * time.Millisecond, DebounceMax: 10 * time.Second,
		Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := bench.RunPilot(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 2 || len(r.Summaries) != 1 || len(r.Ratios) != 0 {
		t.Fatalf("%d runs, %d summaries, %d ratios; want 2 runs of ours alone, one summary, no ratio", len(r.Runs), len(r.Summaries), len(r.Ratios))
	}
	for _, run := range r.Runs {
		if run.Missed != 0 || run.E2E.N != clients*changes {
			t.Errorf("round %d: %d deliveries, %d missed; want all %d", run.Round, run.E2E.N, run.Missed, clients*changes)
		}
		s := run.Stages
		if s.Deliveries != clients*changes {
			t.Errorf("round %d: %d deliveries split by stage, want every one of %d (%s)", run.Round, s.Deliveries, clients*changes, s.Source)
		}
		for name, v := range map[string]float64{"watch": s.Watch, "debounce": s.Debounce, "push": s.Push, "send": s.Send} {
			if math.IsNaN(v) || v < 0 {
				t.Errorf("round %d: stage %s is %v, want a time", run.Round, name, v)
			}
		}
		if sum := s.Watch + s.Debounce + s.Push + s.Send; math.Abs(sum-s.Total) > 1e-6 {
			t.Errorf("round %d: stages add up to %.3f ms, the deliveries' mean end to end is %.3f ms", run.Round, sum, s.Total)
		}
		// The debounce holds a change its quiet period at least: a push
		// that skipped it would show here.
		if s.Debounce < ms(c.DebounceAfter) {
			t.Errorf("round %d: debounce stage %.1f ms, shorter than PILOT_DEBOUNCE_AFTER", run.Round, s.Debounce)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("-json cannot write the result: %v", err)
	}

	st, err := results.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, run := range r.Runs {
		row, err := run.StoreRow()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.InsertControlPlaneRun(row); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := st.ControlPlaneRuns()
	if err != nil {
		t.Fatal(err)
	}
	metric, err := history.LookupMetric("e2e-p99")
	if err != nil {
		t.Fatal(err)
	}
	series, err := history.BuildControlPlane(stored, history.ControlPlaneQuery{Shape: bench.PilotShape, Metric: metric, Local: results.LocalMachine()})
	if err != nil {
		t.Fatalf("history -cpload %s: %v", bench.PilotShape, err)
	}
	if len(series.Points) != 2 {
		t.Fatalf("history -cpload %s has %d points, want the 2 runs", bench.PilotShape, len(series.Points))
	}
	for i, p := range series.Points {
		if want := r.Runs[i].E2E.P99; p.Value != want {
			t.Errorf("point %d: e2e-p99 %v, the run measured %v", i, p.Value, want)
		}
	}
	for _, row := range stored {
		if row.Target != bench.SubjectPilot || row.Changes == 0 {
			t.Errorf("stored run: target %q, %d changes; want %s with its changes", row.Target, row.Changes, bench.SubjectPilot)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
