package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/results"
)

// The command end to end on port 0: the ready file says where the API
// listens, it answers there from the store named, and it stops cleanly.
func TestDashboardServesTheStoreOnPortZero(t *testing.T) {
	s := newLabStore(t)
	s.invocation("1.0.0", results.LocalMachine(), 2)
	s.invocation("1.1.0", results.LocalMachine(), 4)
	scenarios, addr, stdout := dashboardScenarios(t, s.path)
	if !strings.Contains(stdout, "meshperf dashboard: API on http://"+addr+"/") {
		t.Errorf("stdout %q does not say where the API is", stdout)
	}
	if len(scenarios) != 1 || scenarios[0].Scenario != "quick" || scenarios[0].Invocations != 2 {
		t.Errorf("GET /api/scenarios = %+v, want quick with 2 invocations", scenarios)
	}
}

// fortioResultFile is a real Fortio result, found from the package's
// directory before any test changes it.
var fortioResultFile, _ = filepath.Abs(filepath.Join("..", "results", "testdata", "fortio-http.json"))

// servedScenario is an entry of /api/scenarios.
type servedScenario struct {
	Scenario          string
	Invocations, Runs int
}

// dashboardScenarios serves db with meshperf dashboard on port 0 (and a
// -data-dir holding a Fortio result, which it checks is listed), reads
// /api/scenarios, and stops it, checking that it stopped cleanly; it
// returns the answer, the address served and what the command printed.
func dashboardScenarios(t *testing.T, db string) ([]servedScenario, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readyFile := filepath.Join(t.TempDir(), "dashboard.ready")
	dataDir := t.TempDir()
	result, err := os.ReadFile(fortioResultFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "fortio-http.json"), result, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runDashboard(ctx, []string{"--db", db, "--listen", "127.0.0.1:0", "--ready-file", readyFile, "--data-dir", dataDir}, &stdout, &stderr)
	}()
	addr, err := waitReadyFile(t, readyFile).Listener(listenerHTTP)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/api/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var scenarios []servedScenario
	err = json.NewDecoder(resp.Body).Decode(&scenarios)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/scenarios: %d, %v", resp.StatusCode, err)
	}
	// -data-dir reaches the server: its result file is listed.
	if resp, err = http.Get("http://" + addr + "/api/fortio"); err != nil {
		t.Fatal(err)
	}
	var files []struct{ File, Error string }
	err = json.NewDecoder(resp.Body).Decode(&files)
	resp.Body.Close()
	if err != nil || len(files) != 1 || files[0].File != "fortio-http.json" || files[0].Error != "" {
		t.Errorf("GET /api/fortio = %d %+v %v, want fortio-http.json, readable", resp.StatusCode, files, err)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d after stop, want 0; stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
		t.Errorf("ready file left behind after a clean stop: %v", err)
	}
	return scenarios, addr, stdout.String()
}

// runDashboardOnce runs the command where it must fail before serving.
func runDashboardOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // should it start serving after all, it stops at once
	code := runDashboard(ctx, args, &stdout, &stderr)
	return code, stderr.String()
}

func TestDashboardRefusesATakenPort(t *testing.T) {
	s := newLabStore(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, stderr := runDashboardOnce(t, "-db", s.path, "-listen", taken.Addr().String())
	want := "meshperf dashboard: --listen: cannot listen on " + taken.Addr().String() + ": "
	if code != exitFailed || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q: want 1 and one line starting %q", code, stderr, want)
	}
}

func TestDashboardRefusesANewerSchema(t *testing.T) {
	s := newLabStore(t)
	db, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, results.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, stderr := runDashboardOnce(t, "-db", s.path, "-listen", "127.0.0.1:0")
	if code != exitFailed || !strings.Contains(stderr, "is newer than this meshperf understands") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q: want 1 and one line on the newer schema", code, stderr)
	}
}
