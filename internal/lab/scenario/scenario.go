// Package scenario says what the lab runs: a Scenario is a matrix of
// connection counts, request rates and mesh modes in the spirit of Istio's
// benchmark harness (perf/benchmark in istio/tools), read from a strict YAML
// file or taken from the scenarios shipped with meshperf, checked before
// anything starts, and expanded into the ordered list of runs (RunSpec) the
// lab executes.
//
// A bad file is rejected with one line that names the field, for example
//
//	scenario latency.yaml: connections[2]: must be at least 1, got 0
package scenario

import (
	"time"

	"github.com/meshperf/meshperf/internal/strictyaml"
	"github.com/meshperf/meshperf/internal/topology"
)

// Protocol is what the load generator speaks to the echo server.
type Protocol string

// The protocols a scenario may use.
const (
	HTTP Protocol = "http" // HTTP/1.1, as Istio's published figures
	H2   Protocol = "h2"   // cleartext HTTP/2 (h2c)
	GRPC Protocol = "grpc" // gRPC ping with a payload
	TCP  Protocol = "tcp"  // TCP echo round trips
)

// Protocols lists the protocols in the order help text shows them.
var protocols = []Protocol{HTTP, H2, GRPC, TCP}

// Mode says which proxies carry the traffic between the two pods.
type Mode string

// The mesh modes: Istio's four two-pod sidecar set-ups, and its two ambient
// ones, where each pod sits on a node of its own whose node proxy
// (ztunnel's role) carries the pod's traffic over HBONE.
const (
	NoMesh        Mode = "no-mesh"        // neither pod has a sidecar: the baseline
	ServerSidecar Mode = "server-sidecar" // only the server pod has one
	ClientSidecar Mode = "client-sidecar" // only the client (load generator) pod has one
	BothSidecars  Mode = "both-sidecars"  // both pods: the normal mesh
	// Ambient is L4: client node proxy -> HBONE -> server node proxy.
	Ambient Mode = "ambient"
	// AmbientWaypoint is L4+L7: a waypoint between the two node proxies.
	AmbientWaypoint Mode = "ambient-waypoint"
	// AmbientZtunnel and AmbientWaypointZtunnel are the same two set-ups with
	// the real ztunnel as both node proxies (meshperf lab -ztunnel PATH), so
	// that it is measured beside meshperf's node proxy in one run.
	AmbientZtunnel         Mode = "ambient-ztunnel"
	AmbientWaypointZtunnel Mode = "ambient-waypoint-ztunnel"
)

// modes are every mode a scenario may name, in the order help text shows
// them; sidecarModes are the default set, which runs on any machine (the
// ambient modes need network namespaces).
var (
	sidecarModes = []Mode{NoMesh, ServerSidecar, ClientSidecar, BothSidecars}
	modes        = append(append([]Mode(nil), sidecarModes...), Ambient, AmbientWaypoint, AmbientZtunnel, AmbientWaypointZtunnel)
)

// Sidecars says which pods of the mode run a sidecar.
func (m Mode) Sidecars() (client, server bool) {
	return m == ClientSidecar || m == BothSidecars, m == ServerSidecar || m == BothSidecars
}

// NodeProxies says whether the mode puts the pods on nodes whose node
// proxies carry their traffic (the ambient modes).
func (m Mode) NodeProxies() bool {
	return m == Ambient || m == AmbientWaypoint || m.Ztunnel()
}

// Waypoint says whether the mode puts a waypoint on the path.
func (m Mode) Waypoint() bool { return m == AmbientWaypoint || m == AmbientWaypointZtunnel }

// Ztunnel says whether the mode's node proxies are the real ztunnel.
func (m Mode) Ztunnel() bool { return m == AmbientZtunnel || m == AmbientWaypointZtunnel }

// ZtunnelTwin is the mode that runs the same set-up with ztunnel as the
// node proxies; "" for a mode without node proxies or already ztunnel's.
func (m Mode) ZtunnelTwin() Mode {
	switch m {
	case Ambient:
		return AmbientZtunnel
	case AmbientWaypoint:
		return AmbientWaypointZtunnel
	}
	return ""
}

// WithZtunnelTwins puts each ambient mode's ztunnel twin right after it,
// unless the scenario names it already: what -ztunnel asks for, meshperf's
// node proxy and ztunnel measured side by side under the same load.
func (s *Scenario) WithZtunnelTwins() {
	var out []Mode
	for _, m := range s.Modes {
		out = append(out, m)
		if twin := m.ZtunnelTwin(); twin != "" && !s.hasMode(twin) {
			out = append(out, twin)
		}
	}
	s.Modes = out
}

// AlwaysMTLS says whether the mode's hop between pods is mutual TLS
// whatever the scenario asks: HBONE, the ambient modes' tunnel, has no
// plain-text form.
func (m Mode) AlwaysMTLS() bool { return m.NodeProxies() }

// IstioLabel is the mode's suffix in Istio's run labels. Istio's runner
// (perf/benchmark/runner/runner.py) ends each label with the sidecar mode it
// ran: "baseline" for no sidecars (older graphs also match "base" and
// "no_istio"), "serveronly", "clientonly" and "both"; the ambient modes end
// with "ambient" and "waypoint". Using the same words keeps
// Istio's graph and CSV scripts, which match on these suffixes, working on our
// results.
func (m Mode) IstioLabel() string {
	switch m {
	case NoMesh:
		return "baseline"
	case ServerSidecar:
		return "serveronly"
	case ClientSidecar:
		return "clientonly"
	case BothSidecars:
		return "both"
	case Ambient:
		return "ambient"
	case AmbientWaypoint:
		return "waypoint"
	case AmbientZtunnel:
		return "ambient_ztunnel"
	case AmbientWaypointZtunnel:
		return "waypoint_ztunnel"
	}
	return string(m)
}

// Scenario is one benchmark: every combination of Connections × QPS is run in
// every mode, Repetitions times. Field comments give the YAML key and the
// default used when the key is absent.
type Scenario struct {
	// Name (name) identifies the scenario in labels, file names and the
	// results store: lower-case letters, digits, '.', '_' and '-'. Default: the
	// file's base name without .yaml, or the shipped name.
	Name string `json:"name"`
	// Description (description) is one or two sentences shown by `lab list`
	// and in the report. Optional.
	Description string `json:"description,omitempty"`
	// Connections (connections, required) are the load generator's -c values:
	// each connection keeps one request in flight (Fortio's semantics, no
	// per-worker division as Istio's Nighthawk runner did). 1..4096 each.
	Connections []int `json:"connections"`
	// QPS (qps, required) are the total request rates across all
	// connections; 0 means as fast as possible. 0..1000000 each.
	QPS []int `json:"qps"`
	// Duration (duration) is how long each run's load lasts, warm-up included:
	// a Go duration ("30s") or a number of seconds as in Istio's configs.
	// Default 30s.
	Duration Duration `json:"duration"`
	// Warmup (warmup) is the first part of each run whose CPU and memory are
	// not sampled, as Istio skips the first minute of Prometheus data; it must
	// be shorter than Duration. Latency covers the whole run, as Fortio reports
	// it. Default: a fifth of Duration, at most 10s.
	Warmup Duration `json:"warmup"`
	// Cooldown (cooldown) is an idle pause after each run so that one run's
	// tail does not spill into the next one's CPU figures. Default 2s.
	Cooldown Duration `json:"cooldown"`
	// PayloadSize (payloadSize) is the echo server's response body in bytes
	// (the ?size= query parameter; for tcp and grpc the echoed payload).
	// 0..16777216. Default 1024, Istio's "1 kB".
	PayloadSize int `json:"payloadSize"`
	// Protocol (protocol) is http, h2, grpc or tcp. Default http.
	Protocol Protocol `json:"protocol"`
	// Modes (modes) are the set-ups to compare. Default: the four sidecar
	// modes, no-mesh first so that the baseline exists before the mesh runs;
	// ambient and ambient-waypoint are asked for by name.
	Modes []Mode `json:"modes"`
	// MTLS (mtls) turns on mutual TLS between sidecars. Default true, as
	// Istio's auto mTLS. It takes effect only in both-sidecars, the one
	// sidecar mode with a sidecar at each end; with one sidecar the hop
	// between pods is plaintext (Istio's PERMISSIVE behaviour), which
	// RunSpec.MTLS records. The ambient modes are mutual TLS either way
	// (HBONE). Asking for it without both-sidecars is allowed; Notes says so.
	MTLS bool `json:"mtls"`
	// AccessLog (accessLog) turns on the sidecars' access log. Default false:
	// Istio's benchmarks measure without it (its sizing guide doubles the CPU
	// estimate with access logging).
	AccessLog bool `json:"accessLog"`
	// ProxyConcurrency (proxyConcurrency) is the sidecar's worker thread
	// count, Istio's proxy concurrency. 1..64. Default 2, as Istio's runs.
	ProxyConcurrency int `json:"proxyConcurrency"`
	// ProxyCPULimit (proxyCPULimit) caps each proxy's CPU (sidecars, node
	// proxies, the waypoint) at this many CPUs, as Istio's
	// sidecar.istio.io/proxyCPULimit annotation sets the sidecar
	// container's limit: a Kubernetes quantity ("500m") or a number of
	// CPUs (0.5), 0.01 to 64. Needs network namespaces (root). Default 0:
	// no limit, as Istio's benchmarks run.
	ProxyCPULimit float64 `json:"proxyCPULimit,omitempty"`
	// Repetitions (repetitions) repeats the whole matrix; the summary takes
	// the median across repetitions. 1..100. Default 1.
	Repetitions int `json:"repetitions"`
	// Jitter (jitter) and Uniform (uniform) are the load generator's -jitter
	// and -uniform. Default false, as Istio runs Fortio with -jitter=False.
	Jitter  bool `json:"jitter"`
	Uniform bool `json:"uniform"`
	// Timeout (timeout) is the load generator's per-request -timeout.
	// Default 3s, Fortio's.
	Timeout Duration `json:"timeout"`
	// Topology (topology) runs a service graph instead of the two-pod
	// echo benchmark: a shipped topology's name or an isotope YAML file,
	// relative to the scenario file. The load goes to its (first)
	// entrypoint over http; payloadSize does not apply (each service
	// answers its own responseSize) and defaults to 0; modes are no-mesh,
	// both-sidecars and ambient, by default the first two. Optional.
	Topology string `json:"topology,omitempty"`
	// Replicas (replicas) overrides every service's numReplicas, as
	// Istio's load test scales its namespaces. Optional; needs topology.
	Replicas int `json:"replicas,omitempty"`
	// App (app) runs an app instead of the two-pod echo benchmark:
	// "acmeair", the Acmeair-like airline app under BluePerf's driver,
	// one pod per service; connections are its users, qps does not apply
	// (the users send as fast as they can, BluePerf's think time none).
	// The same modes as a topology. Optional; not with topology.
	App string `json:"app,omitempty"`
	// Graph is the topology read, replicas applied; nil without one, and
	// for an app, whose graph the lab takes from the app itself.
	Graph *topology.Topology `json:"-"`
	// TopologySource is what reads the same topology again, for the
	// services the lab starts: the shipped name, or the file's absolute
	// path.
	TopologySource string `json:"-"`
}

// Defaults used for keys a file leaves out.
const (
	DefaultDuration         = 30 * time.Second
	DefaultCooldown         = 2 * time.Second
	DefaultPayloadSize      = 1024
	DefaultProxyConcurrency = 2
	DefaultTimeout          = 3 * time.Second
	maxDefaultWarmup        = 10 * time.Second
)

// defaults returns a scenario with every default set except Warmup, which
// depends on Duration and is filled in after decoding.
func defaults() Scenario {
	return Scenario{
		Duration:         Duration(DefaultDuration),
		Cooldown:         Duration(DefaultCooldown),
		PayloadSize:      DefaultPayloadSize,
		Protocol:         HTTP,
		Modes:            append([]Mode(nil), sidecarModes...),
		MTLS:             true,
		ProxyConcurrency: DefaultProxyConcurrency,
		Repetitions:      1,
		Timeout:          Duration(DefaultTimeout),
	}
}

// defaultWarmup is a fifth of the run, capped, so short runs stay valid.
func defaultWarmup(d time.Duration) time.Duration {
	return min(d/5, maxDefaultWarmup)
}

// Notes are remarks about a valid scenario that a person should see before
// it runs (settings that will have no effect).
func (s *Scenario) Notes() []string {
	var notes []string
	if s.MTLS && !s.hasMode(BothSidecars) && !s.hasNodeProxyMode() {
		notes = append(notes, "mtls: no effect without both-sidecars (mTLS needs a sidecar at each end); runs use plaintext between pods")
	}
	if !s.MTLS && s.hasNodeProxyMode() {
		notes = append(notes, "mtls: the ambient modes are mutual TLS all the same (HBONE has no plain-text form)")
	}
	if s.App != "" && (len(s.QPS) != 1 || s.QPS[0] != 0) {
		notes = append(notes, "qps: no effect with app "+s.App+"; its users send as fast as they can (BluePerf's think time none)")
	}
	if s.IsGraph() && s.PayloadSize != 0 {
		notes = append(notes, "payloadSize: no effect with a topology; each service answers its own responseSize")
	}
	if s.AccessLog && !s.hasSidecarMode() {
		notes = append(notes, "accessLog: no effect, no mode has a sidecar")
	}
	return notes
}

func (s *Scenario) hasMode(m Mode) bool {
	for _, x := range s.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// hasNodeProxyMode reports whether any mode is an ambient one.
func (s *Scenario) hasNodeProxyMode() bool {
	for _, m := range s.Modes {
		if m.NodeProxies() {
			return true
		}
	}
	return false
}

func (s *Scenario) hasSidecarMode() bool {
	for _, m := range s.Modes {
		if c, srv := m.Sidecars(); c || srv {
			return true
		}
	}
	return false
}

// FieldError is a problem with one field; Field is its path in the file, as
// "connections[2]".
type FieldError = strictyaml.FieldError

var fieldErr = strictyaml.Errorf
