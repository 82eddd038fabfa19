package perfcheck

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyTree copies testdata's criterion layout into a temporary folder, so
// that a test can age its files.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(to, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// TestCriterionRows reads a criterion output folder (testdata/criterion,
// written from criterion's documented layout: <group>_<...>/<function>/
// {new,main,change}/estimates.json and new/benchmark.json) and judges each
// bench from criterion's estimate of the median's change.
func TestCriterionRows(t *testing.T) {
	root := copyTree(t, "testdata/criterion")
	results, err := readCriterionRun(root, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	st := Stats{Confidence: 0.95, Threshold: 0.1}
	want := map[string]Verdict{
		"select_route/istio/fqdn_port":      Worse,  // +25%, interval [+21%, +29%]
		"select_route/istio/vip":            Same,   // the interval spans 0
		"select_route/large/unknown_host":   Better, // -30%
		"headers/rewrite_path/none":         Same,   // significant, but +3% < 10%
		"headers/prepare_headers/grpc_call": New,    // no baseline
	}
	if len(results) != len(want) {
		t.Fatalf("%d benches read, want %d", len(results), len(want))
	}
	for _, r := range results {
		row := criterionRow(r, st)
		if row.Verdict != want[r.id] {
			t.Errorf("%s: %s (change %+.2f [%+.2f, %+.2f]), want %s", r.id, row.Verdict, row.Change, row.ChangeLo, row.ChangeHi, want[r.id])
		}
		switch r.id {
		case "select_route/istio/fqdn_port":
			if !row.Significant || math.Abs(row.Baseline.Median-56e-9) > 1e-15 || math.Abs(row.New.Median-70e-9) > 1e-15 || row.Unit != "sec/op" {
				t.Errorf("fqdn_port: %+v %+v %+v", row, *row.Baseline, *row.New)
			}
			if r.dir != "select_route_istio/fqdn_port" {
				t.Errorf("fqdn_port kept in %q", r.dir)
			}
		case "headers/rewrite_path/none":
			if !row.Significant {
				t.Errorf("rewrite_path/none: interval [+1%%, +5%%] is significant")
			}
		}
	}

	// A change criterion left in an earlier run is not this run's: a bench
	// whose change/estimates.json is older than the run is new.
	old := time.Now().Add(-time.Hour)
	changed := filepath.Join(root, "select_route_istio", "fqdn_port", "change", "estimates.json")
	if err := os.Chtimes(changed, old, old); err != nil {
		t.Fatal(err)
	}
	results, err = readCriterionRun(root, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.id == "select_route/istio/fqdn_port" && criterionRow(r, st).Verdict != New {
			t.Errorf("fqdn_port with a stale change: %s, want new", criterionRow(r, st).Verdict)
		}
	}
}
