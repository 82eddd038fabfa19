package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// labBinaries is meshperf with meshperf-proxy beside it, where the lab
// looks first (testenv.MeshperfWithProxy), and, as root, what the lab's
// pods need; it skips without a built proxy.
func labBinaries(t *testing.T) string {
	t.Helper()
	meshperf := testenv.MeshperfWithProxy(t, "../..")
	if os.Geteuid() == 0 {
		testenv.NeedNetns(t)
	}
	return meshperf
}

// The dashboard starts a shipped scenario as its own child: the session
// shows the lab's first run with its load generator's progress, a second
// start is refused while it runs, and stopping the dashboard's runner
// stops the lab, which ends the session as interrupted.
func TestLiveStartRunsAShippedScenario(t *testing.T) {
	meshperf := labBinaries(t)
	store := newSeededStore(t)
	// The runner needs the server's address before the server exists:
	// the handler is set once the listener is.
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	defer srv.Close()
	outRoot := filepath.Join(t.TempDir(), "lab")
	lr := dashboard.NewLabRunner(dashboard.LabRunConfig{Executable: meshperf, DB: store.path,
		OutRoot: outRoot, SelfURL: srv.URL, Token: "s3cret"})
	h = dashboard.New(store.st, nil, dashboard.WithToken("s3cret"), dashboard.WithLabRunner(lr))
	defer lr.Stop()

	wantPostError(t, srv, "/api/live/start", "s3cret", `{"scenario":"nosuch"}`, http.StatusBadRequest, `no shipped scenario "nosuch"`)
	wantPostError(t, srv, "/api/live/start", "s3cret", `{}`, http.StatusBadRequest, "no scenario")
	code, body := post(t, srv, "/api/live/start", "s3cret", `{"scenario":"quick"}`)
	var started struct{ ID string }
	if err := json.Unmarshal(body, &started); err != nil || code != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /api/live/start = %d %s, want 201 and the session's id", code, body)
	}
	wantPostError(t, srv, "/api/live/start", "s3cret", `{"scenario":"quick"}`, http.StatusConflict, "one at a time")

	var got struct {
		State  string
		Events []live.Event
	}
	read := func() error {
		resp, err := http.Get(srv.URL + "/api/live/" + started.ID)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&got)
	}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := read(); err != nil {
			return err
		}
		var sawRun bool
		for _, e := range got.Events {
			if e.Kind == live.KindRun && e.RunIndex == 1 && e.RunTotal == 4 && e.Mode == "no-mesh" {
				sawRun = true
			}
			if sawRun && e.Kind == live.KindProgress && e.Calls > 0 && e.TargetQPS == 1000 {
				return nil
			}
		}
		if got.State != "running" {
			return fmt.Errorf("session %s before any progress: %+v", got.State, got.Events)
		}
		return fmt.Errorf("no progress of run 1 of 4 (no-mesh) yet: %d events", len(got.Events))
	})
	lr.Stop()
	if err := read(); err != nil {
		t.Fatal(err)
	}
	last := got.Events[len(got.Events)-1]
	if got.State != "failed" || last.Kind != live.KindError || !strings.Contains(last.Message, "interrupted") {
		t.Errorf("after stopping: %s, last event %+v; want failed, interrupted", got.State, last)
	}
	// The lab wrote where the dashboard said: its log among its outputs.
	if _, err := os.Stat(filepath.Join(outRoot, "live-"+started.ID, "lab-run.log")); err != nil {
		t.Errorf("the lab's log: %v", err)
	}
	if code, body := post(t, srv, "/api/live/start", "s3cret", `{"scenario":"nosuch"}`); code != http.StatusBadRequest {
		t.Errorf("after the run, a start = %d %s, want the scenario checked again (400)", code, body)
	}
}
