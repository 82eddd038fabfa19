package perfcheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// copyTiny copies testdata/tiny into a temporary folder, so that -update
// writes there.
func copyTiny(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command: ", err)
	}
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "tiny_test.go", goBaselineName} {
		b, err := os.ReadFile(filepath.Join("testdata", "tiny", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func tinyOptions(path string) Options {
	// Four runs each are the fewest for which the U test can reach
	// p < 0.05 (benchmath: 0.029).
	return Options{Path: path, Bench: ".", Count: 4, Benchtime: 20 * time.Millisecond, Stats: Stats{Confidence: 0.95, Threshold: 0.1}}
}

// TestCheckTinyPackage runs perfcheck end to end on a real package: go test
// -bench on benchmarks that sleep 1 ms, against a baseline of 1 ns/op
// (worse), 1 s/op and 1000 B/op (better) and a benchmark that is gone, recorded on
// another machine. Then -update rewrites the baseline from this machine.
func TestCheckTinyPackage(t *testing.T) {
	dir := copyTiny(t)
	ctx := context.Background()
	plan, err := NewPlan(ctx, tinyOptions(dir), false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.rust != nil {
		t.Errorf("a module without proxy/ has no Rust side")
	}
	report, err := plan.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Groups) != 1 || report.Groups[0].Name != "example.com/perfchecktiny" || report.Groups[0].BaselineCommit != "0123456789ab" {
		t.Fatalf("groups %+v, want the tiny package with its baseline", report.Groups)
	}
	want := map[[2]string]Verdict{
		{"SleepAgainst1ns", "sec/op"}: Worse,
		{"SleepAgainst1s", "sec/op"}:  Better,
		{"SleepAgainst1s", "B/op"}:    Better,
		{"Added", "sec/op"}:           New,
		{"Removed", "sec/op"}:         Gone,
	}
	got := map[[2]string]Verdict{}
	for _, row := range report.Groups[0].Rows {
		got[[2]string{row.Name, row.Unit}] = row.Verdict
		if row.Unit == "sec/op" && row.New != nil && (row.New.Median < 1e-3 || row.New.Median > 0.1) {
			t.Errorf("%s: median %v s/op for a 1 ms sleep", row.Name, row.New.Median)
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s: %q, want %q", k[0], k[1], got[k], v)
		}
	}
	if !report.Failed() || report.Summary.Worse != 1 || report.Summary.Better != 3 {
		t.Errorf("summary %+v: want failed with one worse (sec/op) and three better (sec/op, B/op twice)", report.Summary)
	}
	if len(report.AcrossMachines) != 1 || !strings.Contains(report.AcrossMachines[0], "64 CPUs (Imaginary CPU @ 9.99GHz), 502.9 GiB") {
		t.Errorf("across machines: %q", report.AcrossMachines)
	}
	var table strings.Builder
	if err := report.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compared across machines:", "SleepAgainst1ns  sec/op", "worse", "perfcheck: 6 compared: 1 worse, 3 better, 2 same; 3 new, 3 gone"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	plan, err = NewPlan(ctx, tinyOptions(dir), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Update(ctx); err != nil {
		t.Fatal(err)
	}
	set, err := readGoBaseline(filepath.Join(dir, goBaselineName), "example.com/perfchecktiny")
	if err != nil {
		t.Fatal(err)
	}
	names, values := set.samples()
	if strings.Join(names, " ") != "SleepAgainst1ns SleepAgainst1s Added" || len(values[sampleKey{"Added", "sec/op"}]) != 4 {
		t.Errorf("updated baseline has %q with %d runs of Added", names, len(values[sampleKey{"Added", "sec/op"}]))
	}
	if m := set.Machine(); m.CPUs != results.LocalMachine().CPUs || m.MemoryMB != results.LocalMachine().MemoryMB || set.config(keyBenchtime) != "20ms" {
		t.Errorf("updated baseline's machine %+v, benchtime %q: want this one's", m, set.config(keyBenchtime))
	}
}

// TestPlanBadInput: what NewPlan refuses before running anything, each as
// one line.
func TestPlanBadInput(t *testing.T) {
	dir := copyTiny(t)
	otherSet := copyTiny(t)
	b, _ := os.ReadFile(filepath.Join(otherSet, goBaselineName))
	_ = os.WriteFile(filepath.Join(otherSet, goBaselineName), []byte(strings.ReplaceAll(string(b), "pkg: example.com/perfchecktiny", "pkg: example.com/elsewhere")), 0o644)
	broken := copyTiny(t)
	_ = os.WriteFile(filepath.Join(broken, goBaselineName), []byte("pkg: example.com/perfchecktiny\nBenchmarkX-2 10 many ns/op\n"), 0o644)
	noPackages := t.TempDir()
	_ = os.WriteFile(filepath.Join(noPackages, "go.mod"), []byte("module example.com/empty\n\ngo 1.26\n"), 0o644)
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"missing folder", tinyOptions(filepath.Join(dir, "nope")), "no such folder"},
		{"another set's baseline", tinyOptions(otherSet), `a baseline of another benchmark set: its pkg is "example.com/elsewhere", the folder holds example.com/perfchecktiny`},
		{"unparsable baseline", tinyOptions(broken), "bench.baseline:2: parsing measurement"},
		{"no packages", tinyOptions(noPackages + "/..."), "holds no Go packages"},
		{"rust without a proxy", Options{Path: dir, Bench: ".", Count: 4, RustOnly: true}, "has no Cargo.toml"},
	} {
		_, err := NewPlan(context.Background(), tc.opts, false)
		var ie InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want an InputError of one line containing %q", tc.name, err, tc.wantErr)
		}
	}
	// A full update rewrites the baselines: a broken one does not stop it.
	if _, err := NewPlan(context.Background(), tinyOptions(broken), true); err != nil {
		t.Errorf("update over a broken baseline: %v", err)
	}
}

// TestCheckFailingBenchmark: a benchmark that fails is a failed run (not
// bad input), and the error says why.
func TestCheckFailingBenchmark(t *testing.T) {
	dir := copyTiny(t)
	if err := os.WriteFile(filepath.Join(dir, "fail_test.go"), []byte("package tiny\n\nimport \"testing\"\n\nfunc BenchmarkFails(b *testing.B) { b.Fatal(\"deliberately\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(context.Background(), tinyOptions(dir), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = plan.Check(context.Background())
	var ie InputError
	if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "deliberately") {
		t.Errorf("check with a failing benchmark: %v", err)
	}
}
