package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// A result of Fortio itself, 1 s against meshperf's echo server on
// loopback: imported, it is a run measured by that Fortio, on no known
// machine unless --this-machine; exported again, its Fortio JSON is the
// file Fortio wrote, byte for byte, and its SMP document names Fortio as
// the load generator.
func TestImportRealFortioResultAndExportIt(t *testing.T) {
	fortio := testenv.NeedFortio(t)
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	dir := t.TempDir()
	result := filepath.Join(dir, "fortio.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, fortio, "load", "-qps", "200", "-c", "2", "-t", "1s",
		"-labels", "fortio-interop_both", "-json", result, "http://"+addr+"/echo")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fortio load: %v\n%s", err, stderr.String())
	}
	db := filepath.Join(dir, "results", "meshperf.db")

	code, out, errOut := runCLI(t, Import, "-db", db, "-labels", "fortio-baseline", "--mesh-name", "istio",
		"--mesh-version", "1.24.2", result)
	if code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	runID := strings.TrimSpace(out)
	store, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.Runs(results.Filter{RunID: runID})
	store.Close()
	if err != nil || len(runs) != 1 {
		t.Fatalf("run %q: %d runs stored, %v", runID, len(runs), err)
	}
	r := runs[0]
	pv := r.Provenance
	if !strings.HasPrefix(pv.Meshperf.Version, "fortio 1.") || pv.DataPlane.Name != "istio" ||
		pv.ControlPlane.Version != "1.24.2" || pv.Labels != "fortio-baseline" || pv.Machine.Key() != "" {
		t.Errorf("provenance %+v: want measured by fortio, istio 1.24.2, the labels, no machine", pv)
	}
	if r.Scenario != "imported" || r.Mode != "both-sidecars" || r.Protocol != "http" || r.RequestedQPS != 200 ||
		r.Connections != 2 || r.Calls < 150 || r.Errors != 0 || r.Repetition != 1 {
		t.Errorf("run %+v", r)
	}

	// The copy kept beside the database is what export gives back.
	code, out, errOut = runCLI(t, Export, "-db", db, "--format", "fortio", runID)
	original, _ := os.ReadFile(result)
	if code != exitOK || out != string(original) || errOut != "" {
		t.Errorf("export --format fortio: exit %d, stderr %q, same bytes as Fortio's: %v", code, errOut, out == string(original))
	}
	code, out, _ = runCLI(t, Export, "-db", db, "--format", "smp", "fortio-baseline")
	var doc struct {
		PerformanceTestConfig struct {
			Clients []struct{ LoadGenerator string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); code != exitOK || err != nil || len(doc.PerformanceTestConfig.Clients) != 1 ||
		doc.PerformanceTestConfig.Clients[0].LoadGenerator != pv.Meshperf.Version {
		t.Errorf("export --format smp: exit %d, %v, clients %+v", code, err, doc.PerformanceTestConfig.Clients)
	}

	// Importing it again is refused; --force imports it as a new run.
	code, _, errOut = runCLI(t, Import, "-db", db, result)
	if code != exitBadInput || !strings.Contains(errOut, "already imported as run "+runID) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("second import: exit %d, %q", code, errOut)
	}
	code, out, _ = runCLI(t, Import, "-db", db, "--force", "--this-machine", result)
	if again := strings.TrimSpace(out); code != exitOK || again == runID {
		t.Errorf("import --force: exit %d, run %q", code, again)
	}
}

// Nighthawk's fortio output (a file written by hand in its shape) and a
// Fortio file imported together: one run id, the Nighthawk result's errors
// counted from its 2xx answers.
func TestImportNighthawkAndFortioFiles(t *testing.T) {
	db := filepath.Join(t.TempDir(), "meshperf.db")
	nighthawk, fortio := "../results/testdata/nighthawk-fortio.json", "../results/testdata/fortio-http.json"
	code, out, errOut := runCLI(t, Import, "-db", db, "-mode", "serveronly", nighthawk, fortio)
	if code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	store, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs, err := store.Runs(results.Filter{RunID: strings.TrimSpace(out)})
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	byTool := map[string]results.Run{}
	for _, r := range runs {
		byTool[strings.Fields(r.Provenance.Meshperf.Version)[0]] = r
		if r.Mode != "server-sidecar" {
			t.Errorf("mode %q, want -mode serveronly read as server-sidecar", r.Mode)
		}
	}
	if nh := byTool["nighthawk"]; nh.Errors != 10 || nh.Calls != 5000 || nh.RequestedQPS != 500 {
		t.Errorf("nighthawk run %+v", nh)
	}
	if _, ok := byTool["fortio"]; !ok {
		t.Errorf("no run measured by fortio among %v", byTool)
	}
}

func runCLI(t *testing.T, command func([]string, io.Writer, io.Writer) int, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := command(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}
