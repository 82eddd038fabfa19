package lab

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// A lab publishing to a real dashboard: the session says which run of the
// matrix is going and how each ended, and between them carries the load
// generators' own progress (through the relay when the pods are network
// namespaces, directly on loopback).
func TestLabPublishesItsMatrixToTheDashboard(t *testing.T) {
	kind := testNetwork(t)
	s := tinyScenario(t, []scenario.Mode{scenario.NoMesh, scenario.BothSidecars}, []int{2})
	st, err := results.Open(filepath.Join(t.TempDir(), "dashboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dash := httptest.NewServer(dashboard.New(st, nil))
	defer dash.Close()
	var warnings strings.Builder
	pub := live.Start(live.Config{URL: dash.URL, Opening: live.Opening{Source: live.SourceLab, Scenario: s.Name},
		Name: "lab test", Warn: &warnings})
	session := pub.Session()
	if session == "" {
		t.Fatalf("no session opened: %s", warnings.String())
	}
	rep := runConfig(t, Config{Scenario: s, Network: kind, Live: pub,
		LoadDashboard: LoadDashboard{URL: dash.URL, Session: session}})
	pub.Publish(live.Event{Kind: live.KindEnd})
	pub.Close()
	if warnings.Len() > 0 || pub.Dropped() > 0 {
		t.Errorf("publishing warned %q, dropped %d events", warnings.String(), pub.Dropped())
	}
	for _, o := range rep.Outcomes {
		if o.Run.Failed {
			t.Fatalf("run %s failed: %s", o.Run.Label, o.Run.FailureReason)
		}
	}
	resp, err := http.Get(dash.URL + "/api/live/" + session)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		State  string
		Events []live.Event
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got.State != "done" {
		t.Fatalf("session %s: %v, state %q; want done", session, err, got.State)
	}
	// The story, run by run: run i/2 (its mode), the load's progress with
	// its calls rising, run-end with the stored figures.
	var story []string
	var calls int64
	for _, e := range got.Events {
		switch e.Kind {
		case live.KindRun:
			story = append(story, "run "+e.Mode)
			calls = 0
			if e.RunTotal != 2 || e.TargetQPS != 500 {
				t.Errorf("run event %+v: want 2 runs at 500 qps", e)
			}
		case live.KindProgress:
			// Never fewer calls; the sample taken as the load stops may add none.
			if e.Calls < calls || e.Calls == 0 || e.P99Ms <= 0 || e.TargetQPS != 500 {
				t.Errorf("progress %+v after %d calls: want calls rising, a p99 and the target", e, calls)
			}
			calls = e.Calls
			if !strings.HasSuffix(story[len(story)-1], "progress") {
				story = append(story, "progress")
			}
		case live.KindRunEnd:
			story = append(story, "end "+e.Mode)
			if e.Calls < calls || e.QPS <= 0 || e.P99Ms <= 0 {
				t.Errorf("run-end %+v: want the run's calls (at least the %d seen), rate and p99", e, calls)
			}
		default:
			story = append(story, e.Kind)
		}
	}
	want := "run no-mesh, progress, end no-mesh, run both-sidecars, progress, end both-sidecars, end"
	if strings.Join(story, ", ") != want {
		t.Errorf("session events: %s\nwant %s", strings.Join(story, ", "), want)
	}
}
