// Package results keeps what the lab measured: one Run per load run, built
// from the load generator's Fortio-compatible JSON plus the runner's process
// figures; Istio's benchmark CSV; a SQLite store that later tools (the
// dashboard) read; the summary in the form of Istio's performance page
// (added latency against no-mesh, vCPU per 1000 rps and MB per proxy); and a
// single-file HTML report.
//
// Units: latencies in a Run are milliseconds (Istio's page speaks in ms);
// the CSV writes microseconds because Istio's CSV does. MB means MiB (2^20
// bytes), as Istio's mem_Mi columns; Istio's page writes "MB" for the same.
package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Process roles, as the lab names the processes of a two-pod run.
const (
	RoleClientSidecar = "client-sidecar"
	RoleServerSidecar = "server-sidecar"
	RoleClientApp     = "client-app" // the load generator
	RoleServerApp     = "server-app" // the echo server
	// The ambient modes' node proxies: the client's node's and the server's.
	RoleClientNodeProxy = "client-node-proxy"
	RoleServerNodeProxy = "server-node-proxy"
	// The ambient-waypoint modes' waypoint, between the two node proxies.
	RoleWaypoint = "waypoint"
)

// Modes as the lab names them (scenario.Mode's values); kept as strings so
// that this package, and readers of its store, do not depend on the lab.
const (
	ModeNoMesh = "no-mesh"
)

// MaxErrorPercent is Istio's cut: a run with more errors than this is kept
// but left out of the summary.
const MaxErrorPercent = 10

// Process is one process's resource use over a run's steady window.
type Process struct {
	Role string `json:"role"`
	// Pod is the pod the process ran in, in a run over a service graph
	// (where many pods share a role); "" otherwise.
	Pod      string  `json:"pod,omitempty"`
	PID      int     `json:"pid"`
	VCPU     float64 `json:"vcpu"`       // CPU seconds (user+system) per second of the window
	RSSMB    float64 `json:"rss_mb"`     // resident set, average over the window, MiB
	PSSMB    float64 `json:"pss_mb"`     // proportional set, average, MiB (NaN if unknown)
	MaxRSSMB float64 `json:"max_rss_mb"` // highest resident set seen, MiB
	// Counters split its CPU and count what it did per request; nil when
	// the run did not measure them (counters.go).
	Counters *ProcessCounters `json:"counters,omitempty"`
}

// Proxy kinds. Istio's page gives what each costs apart (per sidecar, per
// ztunnel, per waypoint), as they differ by an order of magnitude; the
// summary does the same.
const (
	ProxySidecar   = "sidecar"
	ProxyNodeProxy = "node proxy"
	ProxyWaypoint  = "waypoint"
)

// ProxyKinds are the kinds in the order the summary lists them.
var ProxyKinds = []string{ProxySidecar, ProxyNodeProxy, ProxyWaypoint}

// ProxyKind is the kind of proxy the process is, "" for an app.
func (p Process) ProxyKind() string {
	switch p.Role {
	case RoleClientSidecar, RoleServerSidecar, RoleGraphSidecar:
		return ProxySidecar
	case RoleClientNodeProxy, RoleServerNodeProxy:
		return ProxyNodeProxy
	case RoleWaypoint:
		return ProxyWaypoint
	}
	return ""
}

// Sidecar says whether the process is a proxy at a pod's end of the path: a
// sidecar or a node proxy, whose figures the summary gives per proxy. The
// waypoint in the middle is given apart (ModeResult.Proxies).
func (p Process) Sidecar() bool {
	k := p.ProxyKind()
	return k == ProxySidecar || k == ProxyNodeProxy
}

// Latency holds a run's latency figures in milliseconds; NaN when unknown.
type Latency struct {
	Min, Max, Avg                   float64
	P50, P75, P90, P99, P999, P9999 float64
}

// Run is one run's record.
type Run struct {
	RunID        string  // the invocation's id, shared by all its runs
	Label        string  // Istio's label, <runid>_qps_<q>_c_<c>_<size>_<mode>
	Scenario     string  //
	Mode         string  // no-mesh, server-sidecar, client-sidecar, both-sidecars
	Protocol     string  // http, h2, grpc, tcp
	Repetition   int     // from 1
	Connections  int     //
	RequestedQPS int     // 0: as fast as possible
	ActualQPS    float64 //
	Duration     time.Duration
	PayloadSize  int       // configured response body, bytes
	ResponseSize float64   // average response size incl. headers, bytes (Fortio's Sizes.Avg); 0 if unknown
	MTLS         bool      //
	StartTime    time.Time //
	Network      string    // "netns" or "loopback", as the runner set the pods up
	Latency      Latency   // ms
	// Spectrum is the latency at SpectrumPercentiles, ms; nil when the
	// result had no successful calls (or the run predates it).
	Spectrum []PercentileValue
	// Histogram is every call's latency, bucketed as the load generator
	// bucketed it (Fortio's DurationHistogram.Data), ms; nil when the run
	// had no calls or was stored before schema 5 (RunHistogram then reads
	// the result file).
	Histogram []HistogramBucket
	// Corrected says Latency is corrected for coordinated omission (meshperf's
	// load generator at a set rate); false for Fortio's own results.
	Corrected    bool
	Calls        int64
	Errors       int64
	ErrorPercent float64
	// Codes counts the calls by answer, as Fortio's RetCodes: HTTP status
	// ("200", "503"), gRPC's "SERVING", and "-1" for a socket error (the
	// connection refused or reset, no answer at all).
	Codes map[string]int64
	// SendDelayP99 is the load generator's P99 lateness in sending
	// requests it could have sent on time (meshperf's SendDelayHistogram),
	// ms: how far the generator itself fell behind. NaN when the result
	// has none (Fortio's, Nighthawk's, or stored before schema 8).
	SendDelayP99 float64
	Processes    []Process
	// Prometheus are the proxies' figures as a Prometheus scraping them
	// read them over the same window (lab run --prometheus); nil without.
	Prometheus []PromFigures
	// Graph is what a run over a service graph adds; nil for a two-pod
	// run.
	Graph         *GraphRun
	Failed        bool
	FailureReason string
	FortioJSON    string // path of the run's Fortio JSON
	// Provenance says what the run measured and where.
	Provenance Provenance
}

// fortioResult is the part of Fortio's (and meshperf load's) JSON read here.
// Decoding the JSON rather than importing the load generator's types keeps
// the file format, which other tools share, the contract.
//
// Nighthawk's `--output-format fortio` writes the same names from a protobuf
// message through protobuf's JSON mapping, so its values differ in type:
// RequestedQPS is a number (a string in its experimental_fortio_pedantic
// form), the 64-bit counts (histogram Count, RetCodes) are strings, and
// ActualDuration is a double. It has no ErrorsDurationHistogram and counts
// only 2xx answers, under RetCodes "200". The flexible types below read
// both spellings.
type fortioResult struct {
	RunType                      string
	Version                      string
	Labels                       string
	StartTime                    time.Time
	RequestedQPS                 flexString
	ActualQPS                    float64
	ActualDuration               float64 // ns
	NumThreads                   int
	DurationHistogram            fortioHistogram
	ErrorsDurationHistogram      *fortioHistogram
	CoordinatedOmissionCorrected bool
	Sizes                        *fortioHistogram
	RetCodes                     map[string]flexCount
	// Provenance is meshperf's addition to the format (Fortio ignores
	// fields it does not know); absent from other tools' results.
	Provenance *Provenance
	// ServiceTimeHistogram is written by meshperf's load generator only,
	// BytesSent by Nighthawk only: they tell the tool that wrote a result.
	ServiceTimeHistogram, BytesSent *json.RawMessage
	// SendDelayHistogram is meshperf's too: how late the generator sent
	// requests it could have sent on time (seconds).
	SendDelayHistogram *fortioHistogram
}

type fortioHistogram struct {
	Count         flexCount
	Min, Max, Avg float64 // seconds
	Data          []struct {
		Start, End, Percent float64 // seconds; Percent is cumulative
		Count               flexCount
	}
	Percentiles []struct{ Percentile, Value float64 }
}

// flexCount is a count written as a JSON number (Fortio) or as a string
// holding one (protobuf's JSON form of a uint64, as Nighthawk writes it).
type flexCount int64

func (c *flexCount) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("count %s is not a whole number", b)
	}
	*c = flexCount(n)
	return nil
}

// flexString is a string field that Nighthawk writes as a JSON number.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%s is neither a string nor a number", b)
	}
	*f = flexString(n)
	return nil
}

// FromFortioJSON builds a Run from a load result. It fills what the JSON
// holds (label, start, rates, duration, connections, latency, errors,
// correction flag, response size, protocol, and meshperf's provenance, or
// for another tool's result the tool and its version); the runner adds the
// rest (run id, scenario, mode, payload, mTLS, network, processes, path).
func FromFortioJSON(data []byte) (Run, error) {
	f, err := decodeFortioResult(data)
	if err != nil {
		return Run{}, err
	}
	r := Run{
		Label:        f.Labels,
		StartTime:    f.StartTime,
		ActualQPS:    f.ActualQPS,
		Duration:     time.Duration(math.Round(f.ActualDuration)),
		Connections:  f.NumThreads,
		Corrected:    f.CoordinatedOmissionCorrected,
		Calls:        int64(f.DurationHistogram.Count),
		Latency:      latencyFrom(f.DurationHistogram),
		Spectrum:     spectrumFrom(f.DurationHistogram),
		Histogram:    histogramFrom(f.DurationHistogram),
		Codes:        make(map[string]int64, len(f.RetCodes)),
		SendDelayP99: sendDelayP99(f.SendDelayHistogram),
	}
	r.Protocol = protocolOf(f.RunType)
	switch {
	case f.Provenance != nil:
		r.Provenance = *f.Provenance
	case f.ServiceTimeHistogram == nil:
		// Another tool's result: its Version is the only provenance it
		// has, and it stands as the build that took the measurement.
		tool := "fortio"
		if f.BytesSent != nil {
			tool = "nighthawk"
		}
		r.Provenance.Meshperf = Build{Version: strings.TrimSpace(tool + " " + f.Version)}
	}
	for code, n := range f.RetCodes {
		r.Codes[code] = int64(n)
	}
	if len(r.Codes) == 0 {
		r.Codes = nil
	}
	if f.ErrorsDurationHistogram != nil {
		r.Errors = int64(f.ErrorsDurationHistogram.Count)
	} else if ok, found := r.Codes["200"]; found {
		// Nighthawk: no error histogram; what is not a 2xx answer failed.
		r.Errors = max(0, r.Calls-ok)
	}
	if q := string(f.RequestedQPS); q != "max" && q != "" {
		n, err := strconv.ParseFloat(q, 64)
		if err != nil {
			return Run{}, fmt.Errorf("read load result: RequestedQPS %q is not a number or max", q)
		}
		r.RequestedQPS = int(math.Round(n))
	}
	if r.Calls > 0 {
		r.ErrorPercent = 100 * float64(r.Errors) / float64(r.Calls)
	}
	if f.Sizes != nil {
		r.ResponseSize = f.Sizes.Avg
	}
	return r, nil
}

// protocolOf is the protocol a result's RunType names (Fortio writes "HTTP",
// "GRPC Ping", "TCP"), "" when it names none.
func protocolOf(runType string) string {
	rt := strings.ToLower(runType)
	for _, p := range []string{"grpc", "tcp", "udp", "http"} {
		if strings.HasPrefix(rt, p) {
			return p
		}
	}
	return ""
}

// decodeFortioResult decodes a load result, refusing JSON that is not one.
func decodeFortioResult(data []byte) (fortioResult, error) {
	var f fortioResult
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("read load result: %w", err)
	}
	if f.DurationHistogram.Count == 0 && f.ActualDuration == 0 {
		return f, fmt.Errorf("read load result: no DurationHistogram or ActualDuration; not a Fortio result")
	}
	return f, nil
}

// ReadFortioFile reads a result file and records its path in the Run.
func ReadFortioFile(path string) (Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Run{}, fmt.Errorf("read load result: %w", err)
	}
	r, err := FromFortioJSON(data)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", path, err)
	}
	r.FortioJSON = path
	return r, nil
}

func latencyFrom(h fortioHistogram) Latency {
	const ms = 1e3
	nan := math.NaN()
	l := Latency{Min: nan, Max: nan, Avg: nan, P50: nan, P75: nan, P90: nan, P99: nan, P999: nan, P9999: nan}
	if h.Count == 0 {
		return l
	}
	l.Min, l.Max, l.Avg = h.Min*ms, h.Max*ms, h.Avg*ms
	for _, p := range []struct {
		pct float64
		dst *float64
	}{{50, &l.P50}, {75, &l.P75}, {90, &l.P90}, {99, &l.P99}, {99.9, &l.P999}, {99.99, &l.P9999}} {
		*p.dst = percentile(h, p.pct) * ms
	}
	return l
}

// sendDelayP99 is the send delay's P99 in ms when the result lists it,
// NaN otherwise: it is the generator's own lateness, judged against a
// fixed limit, and interpolating it from coarse buckets could call a
// generator late, or on time, that was not.
func sendDelayP99(h *fortioHistogram) float64 {
	if h == nil {
		return math.NaN()
	}
	for _, x := range h.Percentiles {
		if x.Percentile == 99 {
			return x.Value * 1e3
		}
	}
	return math.NaN()
}

// percentile reads p from the result's percentile list, or, when the run
// did not ask for it, interpolates it from the buckets as Fortio does.
func percentile(h fortioHistogram, p float64) float64 {
	for _, x := range h.Percentiles {
		if math.Abs(x.Percentile-p) < 1e-9 {
			return x.Value
		}
	}
	prev := 0.0
	for _, b := range h.Data {
		if b.Percent >= p {
			if b.Percent == prev {
				return b.End
			}
			v := b.Start + (b.End-b.Start)*(p-prev)/(b.Percent-prev)
			return math.Min(math.Max(v, h.Min), h.Max)
		}
		prev = b.Percent
	}
	return math.NaN()
}

// SidecarVCPU is the mean vCPU of the run's sidecars, and how many there are.
func (r Run) SidecarVCPU() (float64, int) {
	return r.sidecarMean(func(p Process) float64 { return p.VCPU })
}

// SidecarRSSMB is the mean RSS of the run's sidecars, MiB.
func (r Run) SidecarRSSMB() (float64, int) {
	return r.sidecarMean(func(p Process) float64 { return p.RSSMB })
}

// VCPUPer1000RPS is the mean sidecar's vCPU per 1000 requests per second of
// actual rate: each proxy on the path handles every request, so the rate is
// not shared between them. NaN without a sidecar or without traffic.
func (r Run) VCPUPer1000RPS() float64 { return r.per1000RPS(r.SidecarVCPU()) }

// per1000RPS divides a mean proxy's vCPU (over n proxies) by the actual
// rate in thousands; NaN without a proxy or without traffic.
func (r Run) per1000RPS(v float64, n int) float64 {
	if n == 0 || r.ActualQPS <= 0 {
		return math.NaN()
	}
	return v / (r.ActualQPS / 1000)
}

// ProxyVCPU, ProxyRSSMB and ProxyVCPUPer1000RPS are the figures above for
// the run's proxies of one kind (ProxyKinds).
func (r Run) ProxyVCPU(kind string) (float64, int) {
	return r.proxyMean(kind, func(p Process) float64 { return p.VCPU })
}

func (r Run) ProxyRSSMB(kind string) (float64, int) {
	return r.proxyMean(kind, func(p Process) float64 { return p.RSSMB })
}

func (r Run) ProxyVCPUPer1000RPS(kind string) float64 { return r.per1000RPS(r.ProxyVCPU(kind)) }

func (r Run) proxyMean(kind string, get func(Process) float64) (float64, int) {
	return r.meanOf(func(p Process) bool { return p.ProxyKind() == kind }, get)
}

func (r Run) sidecarMean(get func(Process) float64) (float64, int) {
	return r.meanOf(Process.Sidecar, get)
}

// meanOf is the mean of get over the run's processes that pick keeps, and
// how many there are; NaN for none.
func (r Run) meanOf(pick func(Process) bool, get func(Process) float64) (float64, int) {
	sum, n := 0.0, 0
	for _, p := range r.Processes {
		if pick(p) {
			sum += get(p)
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}

// Process returns the run's process with that role.
func (r Run) Process(role string) (Process, bool) {
	for _, p := range r.Processes {
		if p.Role == role {
			return p, true
		}
	}
	return Process{}, false
}

// Excluded says why a run is left out of the summary, or "" if it is not.
func (r Run) Excluded() string {
	switch {
	case r.Failed:
		return "failed: " + r.FailureReason
	case r.ErrorPercent > MaxErrorPercent:
		return fmt.Sprintf("%.1f%% errors (over %d%%)", r.ErrorPercent, MaxErrorPercent)
	}
	return ""
}
