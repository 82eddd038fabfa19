// Package capacity turns a sweep — full measured runs at rising request
// rates, per mesh mode — into what an operator sizes a mesh by: where each
// latency percentile bends (the knee), the highest rate that still meets
// the latency objectives (the capacity) and what the mesh costs of it, how
// each proxy's CPU and memory grow with the rate (a fitted line with its
// quality), and for a target rate the vCPU and memory to reserve per proxy,
// with the evidence behind them.
//
// It knows nothing of how the steps were measured: the lab (meshperf lab
// sweep) and the load generator (meshperf load -qps START:END) both hand it
// Steps. It decides, step by step, whether a sweep goes on (Judge, Search),
// and analyses the finished sweep (Analyze).
package capacity

import (
	"time"
)

// Objective is a latency objective: the latency at Percentile must stay at
// or below Limit. Written "p99=5ms" (ParseObjective).
type Objective struct {
	Percentile float64       `json:"percentile"` // one of Percentiles
	Limit      time.Duration `json:"limit_ns"`
}

// Percentiles are those an objective may name and a Step carries: every
// one of them is in the lab's latency spectrum and in the load generator's
// -p list in a sweep, so no objective depends on interpolation.
var Percentiles = []float64{50, 75, 90, 95, 99, 99.9, 99.99}

// CurvePercentiles are the percentiles whose curves (latency against rate)
// the analysis finds knees on and reports draw.
var CurvePercentiles = []float64{50, 90, 99}

// Objectives are a sweep's latency objectives, all of which a step must
// meet. As a flag.Value it takes one objective or a comma-separated list,
// and may be repeated (-slo p99=5ms -slo p50=1ms).
type Objectives []Objective

// Range is a ladder of request rates, START:END[:STEP] (ParseRange): from
// Start to End by Step, or doubling from Start when Step is 0, End always
// included.
type Range struct {
	Start, End, Step int
}

// PercentileMS is the latency at one percentile, in milliseconds.
type PercentileMS struct {
	Percentile float64 `json:"p"`
	MS         float64 `json:"ms"`
}

// ProxyUsage is one proxy's resource use over a step's steady window.
type ProxyUsage struct {
	Role  string  `json:"role"`   // results' role: client-sidecar, server-node-proxy, waypoint, ...
	Kind  string  `json:"kind"`   // results' proxy kind: sidecar, node proxy, waypoint
	VCPU  float64 `json:"vcpu"`   // CPU seconds per second; NaN when unknown
	MemMB float64 `json:"mem_mb"` // resident memory, MiB (PSS where known); NaN when unknown
}

// Saturation is what says whether a process that is not under test (the
// load generator, the app server) was itself the bottleneck of a step.
type Saturation struct {
	VCPU  float64 `json:"vcpu"`  // CPU seconds per second over the window; NaN when unknown
	Cores float64 `json:"cores"` // how many CPUs it may use (its GOMAXPROCS, the machine's CPUs)
	// SendDelayP99MS is the load generator's P99 lateness in sending
	// requests it could have sent on time (its own timer and scheduling,
	// not waits for a connection); NaN when unknown or for a server.
	SendDelayP99MS float64 `json:"send_delay_p99_ms"`
}

// Step is one measured run of a sweep.
type Step struct {
	Label        string         `json:"label"` // the run's label, to find it in the store
	RequestedRPS int            `json:"requested_rps"`
	ActualRPS    float64        `json:"actual_rps"`
	Latency      []PercentileMS `json:"latency"` // at least at Percentiles
	ErrorPercent float64        `json:"error_percent"`
	// Connections is the load generator's connection count, each with one
	// request in flight at most, and MeanMS the mean latency: by Little's
	// law Connections/MeanMS bounds the rate the connections can carry,
	// which tells a system that could not keep up from a generator that
	// did not send. 0 and NaN when unknown.
	Connections int          `json:"connections,omitempty"`
	MeanMS      float64      `json:"mean_ms"`
	Generator   Saturation   `json:"generator"`
	Server      Saturation   `json:"server"`
	Proxies     []ProxyUsage `json:"proxies,omitempty"`
	// Refined marks a step the search added between two ladder steps to
	// narrow the capacity down.
	Refined bool `json:"refined,omitempty"`
	// Repetitions is how many runs the step is the median of
	// (MedianStep); 0 or 1 for a single run.
	Repetitions   int    `json:"repetitions,omitempty"`
	Failed        bool   `json:"failed,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
}

// Verdict is what one step says about the sweep.
type Verdict string

// The verdicts, in the order Judge checks them.
const (
	// RunFailed: the run itself failed (a process died, a traffic check
	// failed); nothing it measured counts.
	RunFailed Verdict = "failed"
	// GeneratorBound: the load generator, not the system under test, was
	// the bottleneck (its CPU at its cores' limit, or its send delay past
	// SendDelayLimit while the rate was missed with connections free: see
	// BusyConnectionsShare). Excluded
	// from knees and fits; a capacity seen only up to here is a lower
	// bound.
	GeneratorBound Verdict = "generator-bound"
	// ErrorsSeen: more than MaxErrorPercent of the calls failed.
	ErrorsSeen Verdict = "errors"
	// RateNotKept: the system under test could not take the rate (the
	// actual rate below KeptRateShare of the requested one, the generator
	// not to blame).
	RateNotKept Verdict = "rate not kept"
	// ObjectiveBroken: a latency objective was missed.
	ObjectiveBroken Verdict = "objective broken"
	// WithinObjectives: the step met every objective; the sweep goes on.
	WithinObjectives Verdict = "ok"
)

// Thresholds Judge applies.
const (
	// KeptRateShare is the share of the requested rate a step must reach
	// to count as having kept it.
	KeptRateShare = 0.95
	// MaxErrorPercent is the share of failed calls (percent) past which
	// errors are said to appear.
	MaxErrorPercent = 0.1
	// SaturatedCPUShare is the share of its cores past which a process is
	// taken as saturated.
	SaturatedCPUShare = 0.9
	// SendDelayLimit is the load generator's P99 send delay past which it
	// is taken as falling behind its own schedule.
	SendDelayLimit = time.Millisecond
	// BusyConnectionsShare is the share of its connections a step's
	// requested rate keeps busy (Little's law: requests in flight = rate ×
	// mean latency) past which a rate not kept is the system's doing: the
	// generator had no free connection to send on, however late it was.
	BusyConnectionsShare = 0.9
)

// Judgement is Judge's verdict on a step, with the sentence that says why.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	// Detail is one sentence for the user, e.g. "p99 6.12 ms > 5 ms".
	Detail string `json:"detail,omitempty"`
	// Broken are the objectives the step missed (any verdict).
	Broken []Objective `json:"broken,omitempty"`
	// ServerBound says the app server's CPU was at its cores' limit: shown
	// beside the step, not excluded (the server is part of what serves the
	// rate, mesh or not).
	ServerBound bool `json:"server_bound,omitempty"`
}

// Knee is where one percentile's latency curve bends.
type Knee struct {
	Percentile float64 `json:"percentile"`
	Found      bool    `json:"found"`
	RPS        float64 `json:"rps,omitempty"` // the knee step's actual rate
	MS         float64 `json:"ms,omitempty"`  // its latency at Percentile
	// Why says why no knee was found (too few steps, a curve that does not
	// bend); empty when found.
	Why string `json:"why,omitempty"`
}

// Capacity is the highest rate a mode sustained within objectives.
type Capacity struct {
	// Objective is the objective ("p99=5ms"), or "all" for every objective
	// together.
	Objective string `json:"objective"`
	// RPS is the highest actual rate of a step that met the objective (with
	// every lower step meeting it too); 0 when even the lowest did not.
	RPS float64 `json:"rps"`
	// NextRPS is the requested rate of the first step that missed it; 0
	// when no step did (the sweep ended first).
	NextRPS int `json:"next_rps,omitempty"`
	// LowerBound says the capacity is at least RPS: the sweep stopped for a
	// reason other than the objective (generator-bound, end of range).
	LowerBound bool `json:"lower_bound,omitempty"`
	// NotMet says even the lowest rate missed the objective.
	NotMet bool `json:"not_met,omitempty"`
}

// Fit is a least-squares line through one proxy's resource use against
// the actual rate: value = Intercept + Slope × rps.
type Fit struct {
	Role      string  `json:"role"`
	Kind      string  `json:"kind"`
	Metric    string  `json:"metric"` // MetricVCPU or MetricMemMB
	Intercept float64 `json:"intercept"`
	Slope     float64 `json:"slope"` // per request per second
	R2        float64 `json:"r2"`    // coefficient of determination; NaN for a flat series
	// ResidualSD is the residuals' standard deviation, the margin advice
	// adds.
	ResidualSD float64 `json:"residual_sd"`
	Points     int     `json:"points"`
	MinRPS     float64 `json:"min_rps"` // the rates the points span
	MaxRPS     float64 `json:"max_rps"`
}

// The metrics a Fit is of.
const (
	MetricVCPU  = "vcpu"
	MetricMemMB = "mem_mb"
)

// ModeSteps are one mode's steps as the sweep ran them, and why it
// stopped raising the rate.
type ModeSteps struct {
	Mode       string `json:"mode"`
	Steps      []Step `json:"steps"`
	StopReason string `json:"stop_reason"`
}

// Input is what Analyze reads: the objectives, the user's target rate (0
// for no advice) and each mode's steps, the baseline (no-mesh) first when
// it was measured.
type Input struct {
	Objectives Objectives  `json:"objectives"`
	TargetRPS  int         `json:"target_rps,omitempty"`
	Baseline   string      `json:"baseline"` // the baseline mode's name, "no-mesh"
	Modes      []ModeSteps `json:"modes"`
	// CPUs is the machine's CPU count, for the evidence sentences.
	CPUs int `json:"cpus"`
}

// Curve is one mode's analysed sweep.
type Curve struct {
	Mode       string      `json:"mode"`
	Steps      []Step      `json:"steps"`      // by requested rate
	Judgements []Judgement `json:"judgements"` // Steps' verdicts, in order
	StopReason string      `json:"stop_reason"`
	Knees      []Knee      `json:"knees"` // one per CurvePercentiles
	// Capacity is under every objective together, PerObjective under each
	// alone (one per objective; none without objectives).
	Capacity     Capacity   `json:"capacity"`
	PerObjective []Capacity `json:"per_objective,omitempty"`
	Fits         []Fit      `json:"fits,omitempty"` // per proxy role and metric
}

// Loss is the capacity a mode loses to the mesh against the baseline,
// under every objective together.
type Loss struct {
	Mode    string  `json:"mode"`
	RPS     float64 `json:"rps"`     // baseline capacity minus the mode's
	Percent float64 `json:"percent"` // of the baseline's
	// Approximate says one side's capacity is a lower bound, so the loss
	// is uncertain (the text says which way).
	Approximate bool   `json:"approximate,omitempty"`
	Note        string `json:"note,omitempty"`
}

// Advice is the sizing advice for one kind of proxy in one mode at the
// target rate.
type Advice struct {
	Mode string `json:"mode"`
	Kind string `json:"kind"` // sidecar, node proxy, waypoint
	// VCPU and MemMB are what to reserve per proxy: the fit at the target
	// rate plus the margin (MarginVCPU, MarginMB), rounded up.
	VCPU       float64 `json:"vcpu"`
	MemMB      float64 `json:"mem_mb"`
	MarginVCPU float64 `json:"margin_vcpu"`
	MarginMB   float64 `json:"margin_mb"`
	// Extrapolated says the target lies beyond the highest rate measured.
	Extrapolated bool `json:"extrapolated,omitempty"`
	// MetHere says the mode met the objectives at the target rate on this
	// machine.
	MetHere bool `json:"met_here"`
	// Evidence is the plain sentence behind the figures: "measured up to N
	// rps on this machine; beyond that it is extrapolated", the fit's
	// quality, whether the objectives held at the target.
	Evidence string `json:"evidence"`
}

// Analysis is a finished sweep's analysis: what the report, the store and
// the dashboard show.
type Analysis struct {
	Objectives Objectives `json:"objectives"`
	TargetRPS  int        `json:"target_rps,omitempty"`
	Baseline   string     `json:"baseline"`
	CPUs       int        `json:"cpus"`
	Curves     []Curve    `json:"curves"`
	Losses     []Loss     `json:"losses,omitempty"`
	Advice     []Advice   `json:"advice,omitempty"`
}
