package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/compare/comparetest"
	"github.com/meshperf/meshperf/internal/results"
)

// compareStore is a real results database holding three lab invocations
// of the quick matrix, five repetitions each, with their load result files:
// "v1" and "v1-again" of the same build, "v2" with 200 us more per request
// on the mesh modes.
func compareStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "meshperf.db")
	st, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The noise of each invocation is drawn from its seed. At 95% about 1
	// metric in 40 of an unchanged build comes out significant by chance,
	// and a noisy one (P99.9) then also beyond the threshold: these seeds
	// draw no such false alarm, so that the test checks the arithmetic
	// and the command, not luck (docs/tracking.md, "compare").
	seeds := []uint64{1, 2, 6}
	machine := results.Machine{Hostname: "lab1", CPUs: 2, CPUModel: "AMD EPYC 7B13", MemoryMB: 7940, Kernel: "Linux 6.8.0"}
	for i, inv := range []struct {
		label      string
		slowdownMs float64
	}{{"v1", 0}, {"v1-again", 0}, {"v2", 0.2}} {
		out := filepath.Join(dir, inv.label)
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		runs, err := comparetest.Runs(comparetest.Invocation{RunID: "run-" + inv.label, Scenario: "quick", Repetitions: 5,
			Start: time.Date(2026, 9, 1, 10+i, 0, 0, 0, time.UTC), SlowdownMs: inv.slowdownMs, Seed: seeds[i], Dir: out,
			Provenance: results.Provenance{Meshperf: results.Build{Version: inv.label}, Labels: inv.label, ParamsHash: "0123456789abcdef",
				DataPlane: results.Component{Name: "meshperf-proxy", Version: inv.label}, Machine: machine}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if err := st.Insert(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

func runCompare(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Compare(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCompareSameBuild(t *testing.T) {
	db := compareStore(t)
	// By label on one side, by run id on the other.
	code, out, errs := runCompare(t, "v1", "run-v1-again", "-db", db)
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q, want 0 and nothing", code, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, "  worse") {
			t.Errorf("same build, yet worse: %s", line)
		}
	}
	if !strings.HasSuffix(out, "\nverdict: ~ (6 rows: no significant change)\n") {
		t.Errorf("last line is not the all-~ verdict:\n%s", out)
	}
}

func TestCompareSlowdown(t *testing.T) {
	db := compareStore(t)
	html := filepath.Join(t.TempDir(), "compare.html")
	code, out, errs := runCompare(t, "-db", db, "v1", "v2", "-json", "-html", html)
	if code != exitFailed || errs != "" {
		t.Fatalf("exit %d, stderr %q, want 1 and nothing", code, errs)
	}
	rep, err := compare.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 6 || rep.Verdict != compare.VerdictWorse {
		t.Fatalf("%d rows, verdict %q; want 6, worse", len(rep.Rows), rep.Verdict)
	}
	for _, r := range rep.Rows {
		want := compare.VerdictWorse
		if r.Mode == results.ModeNoMesh {
			want = compare.VerdictUnchanged
		}
		if r.Verdict != want {
			t.Errorf("%s: %q, want %q", r.Cell, r.Verdict, want)
		}
		if r.Metrics[0].Histogram == nil || r.Metrics[0].Histogram[0].Source != compare.SourceHistogram {
			t.Errorf("%s: P50 not read from the load result files' histograms", r.Cell)
		}
	}
	// The no-mesh runs' provenance has no data plane: two on each side.
	if got := rep.B.Provenance; len(got) != 2 || got[0].Meshperf.Version != "v2" || got[1].DataPlane.Version != "v2" {
		t.Errorf("B's provenance %+v, want v2's", got)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `data-kind="compare-distribution" data-series="A: v1,B: v2"`); n != 6 {
		t.Errorf("page has %d overlaid distributions of A and B, want 6", n)
	}
	// -fail-on none: the same verdict, exit 0.
	if code, out, _ := runCompare(t, "-db", db, "v1", "v2", "-fail-on", "none"); code != exitOK || !strings.Contains(out, "verdict: worse (6 rows: 4 worse)") {
		t.Errorf("-fail-on none: exit %d, output\n%s", code, out)
	}
}

// TestCompareFiles compares load result files with no database at all,
// and a side with itself.
func TestCompareFiles(t *testing.T) {
	dir := t.TempDir()
	runs, err := comparetest.Runs(comparetest.Invocation{RunID: "r", Repetitions: 1, Seed: 1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	file := runs[1].FortioJSON
	code, out, errs := runCompare(t, "-db", filepath.Join(dir, "none.db"), file, file)
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "not enough repetitions (need >= 3)") {
		t.Errorf("one run a side, yet no 'not enough repetitions':\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("compare created the database it did not find")
	}
}
