package loadgen

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// RunResult is the protocol-independent part of a result, with the field names
// and meanings of Fortio's JSON (its periodic.RunnerResults) so that Fortio's
// report UI and Istio's benchmark tooling read it unchanged. Protocols embed it
// and add their own fields, as Fortio's do.
type RunResult struct {
	RunType           string
	Labels            string
	StartTime         time.Time
	RequestedQPS      string // "max", or the rate
	RequestedDuration string // "10s", "exactly 100 calls" or "until stopped"
	ActualQPS         float64
	ActualDuration    time.Duration // nanoseconds in JSON
	NumThreads        int
	Version           string
	// DurationHistogram holds the latency corrected for coordinated omission:
	// each request's time counts from when it was due whenever it had to wait
	// for a connection.
	DurationHistogram       histogram.Data
	ErrorsDurationHistogram histogram.Data
	Exactly                 int64
	Jitter                  bool
	Uniform                 bool
	NoCatchUp               bool
	RunID                   int64
	AccessLoggerInfo        string
	ID                      string

	// meshperf's additions; Fortio's readers ignore them.

	// ServiceTimeHistogram is the uncorrected latency, from each request's
	// actual send: what Fortio would have reported.
	ServiceTimeHistogram histogram.Data
	// SendDelayHistogram is how late the generator sent requests it could have
	// sent on time (its timer precision); not counted in either latency.
	SendDelayHistogram histogram.Data
	// CoordinatedOmissionCorrected says DurationHistogram is corrected (true for
	// paced runs; at max rate there is no schedule to be late against).
	CoordinatedOmissionCorrected bool
	SkippedCalls                 int64 // late calls skipped with NoCatchUp
	Aborted                      bool  // stopped by AbortOn
	// Provenance says what the result measured and where (the build, the
	// mesh under test, the parameters, the machine), as the caller gave it
	// in Describe; omitted when it gave none.
	Provenance any `json:",omitempty"`
}

// Describe says what was asked for, for a result's RunResult.
type Describe struct {
	RunType     string
	Labels      string
	Version     string
	Percentiles []float64
	RunID       int64
	// Provenance is copied into the result as is: the load generator does
	// not know the mesh under test, its caller does.
	Provenance any
}

// NewRunResult fills a RunResult from the options of a run and what it measured.
func NewRunResult(d Describe, o Options, s *Stats) RunResult {
	const seconds = 1e-9
	r := RunResult{
		RunType:                      d.RunType,
		Labels:                       d.Labels,
		StartTime:                    s.Start,
		RequestedQPS:                 "max",
		RequestedDuration:            o.Duration.String(),
		ActualQPS:                    s.ActualQPS(),
		ActualDuration:               s.Duration,
		NumThreads:                   o.Connections,
		Version:                      d.Version,
		DurationHistogram:            s.Latency.Export(seconds, d.Percentiles),
		ErrorsDurationHistogram:      s.ErrorLatency.Export(seconds, d.Percentiles),
		Exactly:                      o.Exactly,
		Jitter:                       o.Jitter,
		Uniform:                      o.Uniform,
		NoCatchUp:                    o.NoCatchUp,
		RunID:                        d.RunID,
		ID:                           ResultID(s.Start, d.Labels),
		ServiceTimeHistogram:         s.ServiceTime.Export(seconds, d.Percentiles),
		SendDelayHistogram:           s.SendDelay.Export(seconds, d.Percentiles),
		CoordinatedOmissionCorrected: o.paced(),
		SkippedCalls:                 s.Skipped,
		Aborted:                      s.Aborted,
		Provenance:                   d.Provenance,
	}
	if o.paced() {
		r.RequestedQPS = strconv.FormatFloat(o.QPS, 'f', -1, 64)
	}
	switch {
	case o.Exactly > 0:
		r.RequestedDuration = "exactly " + strconv.FormatInt(o.Exactly, 10) + " calls"
	case o.Duration == 0:
		r.RequestedDuration = "until stopped"
	}
	if r.ErrorsDurationHistogram.Count == 0 {
		r.ErrorsDurationHistogram.Percentiles = nil
	}
	return r
}

var notAlnum = regexp.MustCompile(`[^A-Za-z0-9]+`)

// ResultID is Fortio's result id: the start time and the labels, made safe for a
// file name (Fortio's report UI lists results by it).
func ResultID(start time.Time, labels string) string {
	id := start.Format("2006-01-02-150405")
	if l := strings.Trim(notAlnum.ReplaceAllString(labels, "_"), "_"); l != "" {
		id += "_" + l
	}
	return id
}
