package history

import (
	"math"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/changepoint"
	"github.com/meshperf/meshperf/internal/results"
)

var day0 = time.Date(2026, 11, 1, 23, 30, 0, 0, time.UTC)

// run is one repetition at 1000 qps, 16 connections, on this machine.
func run(runID, mode string, minute int, p99 float64) results.Run {
	return results.Run{RunID: runID, Scenario: "s", Mode: mode, RequestedQPS: 1000, Connections: 16,
		StartTime: day0.Add(time.Duration(minute) * time.Minute), Calls: 100,
		Latency:    results.Latency{P50: p99 / 2, P90: p99 / 1.5, P99: p99, P999: p99 * 2},
		Provenance: results.Provenance{Machine: results.LocalMachine()}}
}

func mustBuild(t *testing.T, runs []results.Run, q Query) Series {
	t.Helper()
	q.Scenario, q.Local, q.QPS, q.Connections = "s", results.LocalMachine(), -1, -1
	if q.By == "" {
		q.By = ByVersion
	}
	if q.Metric.Name == "" {
		q.Metric, _ = LookupMetric("p99")
	}
	s, err := Build(runs, q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGroupLabels(t *testing.T) {
	r := run("a", "both-sidecars", 0, 1)
	r.Provenance.Meshperf = results.Build{Version: "v0.9.0", Commit: "0123456789abcdef0123", Modified: true}
	for _, c := range []struct {
		by        GroupBy
		dataPlane results.Component
		want      string
	}{
		{ByVersion, results.Component{Name: "envoy", Version: "1.31.2"}, "1.31.2"},
		{ByVersion, results.Component{}, "v0.9.0"}, // no data plane: meshperf's version
		{ByCommit, results.Component{Name: "envoy", Version: "1.31.2"}, "0123456789ab-modified"},
		{ByDate, results.Component{}, "2026-11-01"},
	} {
		r.Provenance.DataPlane = c.dataPlane
		if got := c.by.group(r.Provenance, r.Provenance.DataPlane, r.StartTime); got != c.want {
			t.Errorf("by %s with data plane %v: %q, want %q", c.by, c.dataPlane, got, c.want)
		}
	}
	if got := ByCommit.group(results.Provenance{}, results.Component{}, day0); got != "unrecorded" {
		t.Errorf("by commit without provenance: %q, want unrecorded", got)
	}
}

// TestPointsAreMediansOfKeptRuns: a failed repetition is left out, an
// invocation without no-mesh has no added latency, and a mode that did not
// run in an invocation gives it no point.
func TestPointsAreMediansOfKeptRuns(t *testing.T) {
	failed := run("a", "both-sidecars", 3, 100)
	failed.Failed = true
	runs := []results.Run{
		run("a", "no-mesh", 0, 1), run("a", "both-sidecars", 1, 2), run("a", "both-sidecars", 2, 4), failed,
		run("b", "both-sidecars", 10, 3), // no no-mesh run
		run("c", "no-mesh", 20, 1),       // no both-sidecars run
		run("d", "no-mesh", 30, 1), run("d", "both-sidecars", 31, 5),
	}
	s := mustBuild(t, runs, Query{})
	if s.Mode != "both-sidecars" || s.QPS != 1000 || s.Connections != 16 || len(s.Points) != 3 {
		t.Fatalf("%+v, want both-sidecars at 1000 qps, 16 connections, points a, b and d", s)
	}
	if p := s.Points[0]; p.RunID != "a" || p.Runs != 2 || p.Value != 3 {
		t.Errorf("a: %+v, want the median 3 ms of its 2 kept runs", p)
	}
	added, _ := LookupMetric("added-p99")
	s = mustBuild(t, runs, Query{Metric: added})
	if s.Points[0].Value != 2 || !math.IsNaN(s.Points[1].Value) || s.Points[2].Value != 4 {
		t.Errorf("added-p99 %+v, want 2, n/a (b has no no-mesh), 4", s.Points)
	}
	// b's NaN is skipped: two points of three are present, too few to analyze.
	if _, err := Analyze(s, changepoint.DefaultOptions()); err != ErrTooFewPoints {
		t.Errorf("2 present points of 3: %v, want ErrTooFewPoints", err)
	}
}

func TestDefaultMode(t *testing.T) {
	s := mustBuild(t, []results.Run{run("a", "no-mesh", 0, 1), run("a", "ambient", 1, 2), run("a", "server-sidecar", 2, 2)}, Query{})
	if s.Mode != "ambient" {
		t.Errorf("mode %q, want ambient: the first mode that is not no-mesh", s.Mode)
	}
	if s := mustBuild(t, []results.Run{run("a", "no-mesh", 0, 1)}, Query{}); s.Mode != "no-mesh" {
		t.Errorf("mode %q, want no-mesh, the only one", s.Mode)
	}
}

func TestRegressedLooksAtTheNewestFlaggedChange(t *testing.T) {
	for _, c := range []struct {
		verdicts []string
		want     bool
	}{
		{nil, false},
		{[]string{Regression}, true},
		{[]string{Regression, Improvement}, false},
		{[]string{Improvement, Regression, ShiftBelowThreshold}, true}, // a small shift neither raises nor clears it
		{[]string{ShiftBelowThreshold}, false},
	} {
		var a Analysis
		for _, v := range c.verdicts {
			a.Changes = append(a.Changes, Change{Verdict: v})
		}
		if got := a.Regressed(); got != c.want {
			t.Errorf("%v: Regressed() = %v, want %v", c.verdicts, got, c.want)
		}
	}
}
