package perfcheck

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/results"
)

func readSet(t *testing.T, path string) *BenchSet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sets, err := readBenchSets(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 {
		t.Fatalf("%s: %d packages, want 1", path, len(sets))
	}
	return sets[0]
}

// TestCompareVerdicts compares a baseline with a run of the same package
// (both as Go prints them) where one benchmark is unchanged, one doubled its
// allocations and got slower, one got faster, one is new and one is gone.
func TestCompareVerdicts(t *testing.T) {
	baseline := readSet(t, "testdata/compare/baseline.txt")
	current := readSet(t, "testdata/compare/new.txt")
	rows := compareSets(baseline, current, Stats{Confidence: 0.95, Threshold: 0.10}, true)
	want := map[[2]string]Verdict{
		{"BuildSnapshot1000Services", "sec/op"}:    Same,
		{"BuildSnapshot1000Services", "B/op"}:      Same,
		{"BuildSnapshot1000Services", "allocs/op"}: Same,
		{"GenerateProxy1000Services", "sec/op"}:    Worse,
		{"GenerateProxy1000Services", "B/op"}:      Worse,
		{"GenerateProxy1000Services", "allocs/op"}: Worse,
		{"IndexFor/no-sidecar", "sec/op"}:          Better,
		{"IndexFor/no-sidecar", "B/op"}:            Same,
		{"IndexFor/no-sidecar", "allocs/op"}:       Same,
		{"Added", "sec/op"}:                        New,
		{"Added", "B/op"}:                          New,
		{"Added", "allocs/op"}:                     New,
		{"Removed", "sec/op"}:                      Gone,
		{"Removed", "B/op"}:                        Gone,
		{"Removed", "allocs/op"}:                   Gone,
	}
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rows), len(want))
	}
	for _, row := range rows {
		k := [2]string{row.Name, row.Unit}
		if row.Verdict != want[k] {
			t.Errorf("%s %s: verdict %s (change %+.1f%%, p=%.4f), want %s", row.Name, row.Unit, row.Verdict, row.Change*100, row.P, want[k])
		}
	}
	byKey := map[[2]string]Row{}
	for _, row := range rows {
		byKey[[2]string{row.Name, row.Unit}] = row
	}
	gen := byKey[[2]string{"GenerateProxy1000Services", "allocs/op"}]
	if gen.Change < 0.99 || gen.Change > 1.01 || gen.P > 0.01 || gen.Baseline.N != 6 || gen.New.N != 6 {
		t.Errorf("doubled allocations: change %+.3f p=%.4f n=%d+%d, want +1.000, p < 0.01, n=6+6", gen.Change, gen.P, gen.Baseline.N, gen.New.N)
	}
	// Identical allocation counts on both sides: no test is possible, and
	// no change is reported.
	if same := byKey[[2]string{"BuildSnapshot1000Services", "B/op"}]; same.Change != 0 || same.Significant {
		t.Errorf("unchanged B/op: change %v, significant %v", same.Change, same.Significant)
	}
	// The same threshold, 0.5: a 40% slowdown is significant but within it.
	rows = compareSets(baseline, current, Stats{Confidence: 0.95, Threshold: 0.5}, true)
	for _, row := range rows {
		if row.Name == "GenerateProxy1000Services" && row.Unit == "sec/op" && (row.Verdict != Same || !row.Significant) {
			t.Errorf("a +%.0f%% change with a 50%% threshold: verdict %s, significant %v; want same, significant", row.Change*100, row.Verdict, row.Significant)
		}
	}
}

// TestCompareWithoutGone leaves out the baseline's benchmarks that did not
// run when -bench selected some.
func TestCompareWithoutGone(t *testing.T) {
	rows := compareSets(readSet(t, "testdata/compare/baseline.txt"), readSet(t, "testdata/compare/new.txt"), Stats{Confidence: 0.95, Threshold: 0.1}, false)
	for _, row := range rows {
		if row.Verdict == Gone {
			t.Errorf("%s %s reported gone", row.Name, row.Unit)
		}
	}
}

func TestBenchNameDropsGOMAXPROCS(t *testing.T) {
	set := readSet(t, "testdata/compare/new.txt")
	names, _ := set.samples()
	want := "BuildSnapshot1000Services GenerateProxy1000Services IndexFor/no-sidecar Added"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("names %q, want %q", got, want)
	}
}

func TestBaselineMachine(t *testing.T) {
	m := readSet(t, "testdata/compare/baseline.txt").Machine()
	want := results.Machine{CPUModel: "Intel(R) Xeon(R) Processor", CPUs: 2, MemoryMB: 24105, Kernel: "Linux 6.18.44"}
	if m != want {
		t.Errorf("machine %+v, want %+v", m, want)
	}
	if got := acrossMachines("x", m, m); got != "" {
		t.Errorf("same machine: %q", got)
	}
	other := m
	other.CPUs = 4
	if got := acrossMachines("the baseline of pkg/x", m, other); !strings.HasPrefix(got, "compared across machines: the baseline of pkg/x was measured on 2 CPUs (Intel(R) Xeon(R) Processor), 23.5 GiB") {
		t.Errorf("other machine: %q", got)
	}
	// The kernel and a few MiB of memory do not make another machine.
	other = m
	other.Kernel, other.MemoryMB = "Linux 6.19", 24200
	if got := acrossMachines("x", m, other); got != "" {
		t.Errorf("same class of machine: %q", got)
	}
}

// TestBaselineRoundTrip writes a set as a baseline file and reads it back:
// the same results and configuration.
func TestBaselineRoundTrip(t *testing.T) {
	set := readSet(t, "testdata/compare/baseline.txt")
	data, err := encodeGoBaseline(set)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/bench.baseline"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := readGoBaseline(path, set.Pkg)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(set.Results) || back.Machine() != set.Machine() || back.config(keyCommit) != "83dc9c3734ea" {
		t.Errorf("read back %d results on %+v commit %q; wrote %d on %+v", len(back.Results), back.Machine(), back.config(keyCommit), len(set.Results), set.Machine())
	}
	rows := compareSets(set, back, Stats{Confidence: 0.95, Threshold: 0.1}, true)
	for _, row := range rows {
		if row.Verdict != Same || row.Change != 0 {
			t.Errorf("%s %s against itself: %s %+v", row.Name, row.Unit, row.Verdict, row.Change)
		}
	}
}

func TestMergeForUpdateKeepsBenchmarksNotRun(t *testing.T) {
	old := readSet(t, "testdata/compare/baseline.txt")
	current := readSet(t, "testdata/compare/new.txt")
	merged := mergeForUpdate(old, current)
	names, values := merged.samples()
	if got := strings.Join(names, " "); got != "BuildSnapshot1000Services GenerateProxy1000Services IndexFor/no-sidecar Added Removed" {
		t.Errorf("merged names %q", got)
	}
	if n := len(values[sampleKey{"GenerateProxy1000Services", "sec/op"}]); n != 6 {
		t.Errorf("GenerateProxy1000Services has %d runs, want only the 6 new ones", n)
	}
}

func TestReadGoBaselineBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, pkg, wantErr string }{
		{"syntax", "pkg: example.com/a\nBenchmarkX-2 100 fast ns/op\n", "example.com/a", "bench.baseline:2: parsing measurement"},
		{"other set", "pkg: example.com/b\nBenchmarkX-2 100 5 ns/op\n", "example.com/a", `a baseline of another benchmark set: its pkg is "example.com/b", the folder holds example.com/a`},
		{"no pkg", "BenchmarkX-2 100 5 ns/op\n", "example.com/a", `its pkg is "", the folder holds example.com/a`},
		{"empty", "# nothing\n", "example.com/a", "no benchmark results in it"},
	} {
		path := dir + "/" + strings.ReplaceAll(tc.name, " ", "-") + "/bench.baseline"
		if err := os.MkdirAll(path[:len(path)-len("/bench.baseline")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readGoBaseline(path, tc.pkg)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestCompareFiles: two files of go test output, as the regression job
// writes them, compared with Check's statistics: the doubled generation is
// worse, the unchanged snapshot the same, and a benchmark only in one file
// new or gone.
func TestCompareFiles(t *testing.T) {
	rep, err := CompareFiles("testdata/compare/baseline.txt", "testdata/compare/new.txt", Stats{Confidence: 0.95, Threshold: 0.10})
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]Verdict{}
	for _, g := range rep.Groups {
		for _, r := range g.Rows {
			verdicts[r.Name+" "+r.Unit] = r.Verdict
		}
	}
	for key, want := range map[string]Verdict{
		"GenerateProxy1000Services allocs/op": Worse,
		"GenerateProxy1000Services sec/op":    Worse,
		"BuildSnapshot1000Services allocs/op": Same,
		"Added sec/op":                        New,
		"Removed sec/op":                      Gone,
	} {
		if verdicts[key] != want {
			t.Errorf("%s: %q, want %q", key, verdicts[key], want)
		}
	}
	if !rep.Failed() || rep.Summary.Worse != 3 {
		t.Errorf("summary %+v: want failed with 3 worse", rep.Summary)
	}
	var ie InputError
	if _, err := CompareFiles("testdata/compare/nope.txt", "testdata/compare/new.txt", Stats{Confidence: 0.95}); !errors.As(err, &ie) {
		t.Errorf("missing file: %v, want an InputError", err)
	}
	if _, err := CompareFiles("testdata/compare/baseline.txt", "compare_test.go", Stats{Confidence: 0.95}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "no Go benchmark results") {
		t.Errorf("not benchmark output: %v, want an InputError saying so", err)
	}
}
