// Package live is the progress of a running load or lab as the dashboard
// shows it: the events a run publishes (Event), the session they belong to
// (Session), and the publisher that posts them to `meshperf dashboard`
// without ever holding the run up (Publisher). The dashboard's side of the
// same contract is internal/dashboard's live endpoints.
package live

import (
	"fmt"
	"time"
)

// The kinds of event, in the order a session sees them.
const (
	KindStart    = "start"    // the session's run began
	KindRun      = "run"      // the lab began run RunIndex of RunTotal of its matrix
	KindProgress = "progress" // figures so far of the load that is running
	KindRunEnd   = "run-end"  // the lab's run ended, with its result or failure
	KindEnd      = "end"      // the session ended well: nothing follows
	KindError    = "error"    // the session failed: nothing follows
)

var kinds = map[string]bool{KindStart: true, KindRun: true, KindProgress: true, KindRunEnd: true, KindEnd: true, KindError: true}

// Event is one step of a session. Figures are the load's so far (progress)
// or final (run-end, end); the dashboard stamps Seq.
type Event struct {
	Seq       int64     `json:"seq"`
	Kind      string    `json:"kind"`
	Time      time.Time `json:"time"`
	RunIndex  int       `json:"run_index,omitempty"` // 1-based
	RunTotal  int       `json:"run_total,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	Label     string    `json:"label,omitempty"`
	ElapsedS  float64   `json:"elapsed_s,omitempty"`
	DurationS float64   `json:"duration_s,omitempty"`
	QPS       float64   `json:"qps,omitempty"`
	TargetQPS float64   `json:"target_qps,omitempty"`
	Calls     int64     `json:"calls,omitempty"`
	Errors    int64     `json:"errors,omitempty"`
	P50Ms     float64   `json:"p50_ms,omitempty"`
	P90Ms     float64   `json:"p90_ms,omitempty"`
	P99Ms     float64   `json:"p99_ms,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// Check says what is wrong with an event a publisher sent, if anything.
func (e Event) Check() error {
	if !kinds[e.Kind] {
		return fmt.Errorf("event kind %q: want start, run, progress, run-end, end or error", e.Kind)
	}
	for name, v := range map[string]float64{"elapsed_s": e.ElapsedS, "duration_s": e.DurationS, "qps": e.QPS,
		"target_qps": e.TargetQPS, "p50_ms": e.P50Ms, "p90_ms": e.P90Ms, "p99_ms": e.P99Ms,
		"calls": float64(e.Calls), "errors": float64(e.Errors), "run_index": float64(e.RunIndex), "run_total": float64(e.RunTotal)} {
		if v < 0 {
			return fmt.Errorf("event %s %v: must not be negative", name, v)
		}
	}
	return nil
}

// Ends says whether the event closes its session.
func (e Event) Ends() bool { return e.Kind == KindEnd || e.Kind == KindError }

// The sources of a session.
const (
	SourceLoad = "load"
	SourceLab  = "lab"
)

// Opening is what a publisher says of its run when it opens a session.
type Opening struct {
	Source   string `json:"source"`
	Scenario string `json:"scenario,omitempty"`
	Target   string `json:"target,omitempty"`
	Label    string `json:"label,omitempty"`
}

// Check says what is wrong with an opening, if anything.
func (o Opening) Check() error {
	if o.Source != SourceLoad && o.Source != SourceLab {
		return fmt.Errorf("source %q: want load or lab", o.Source)
	}
	return nil
}

// Millis is d in milliseconds, the unit of the events' percentiles.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
