package export

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// SMPVersion is the Service Mesh Performance specification the documents
// follow: its protos are unchanged from the v0.6.1 tag to the repository's
// head they were checked against.
const SMPVersion = "v0.6.1"

// SMPDocument is what `export --format smp` writes: one JSON object holding
// the four kinds of SMP message, each in protobuf's JSON mapping (field
// names in lowerCamelCase, enums by name, 64-bit integers as strings,
// timestamps in RFC 3339 UTC, fields at their zero value left out). SMP
// defines the messages, not a file that holds several; this object is
// meshperf's container, and each value in it decodes as the message its
// key names.
//
// Results link to the rest by id: testId to the PerformanceTestConfig,
// meshConfigId to a ServiceMeshConfig, envId to an EnvironmentConfig.
type SMPDocument struct {
	PerformanceTestConfig  SMPTestConfig    `json:"performanceTestConfig"`
	EnvironmentConfigs     []SMPEnvironment `json:"environmentConfigs"`
	ServiceMeshConfigs     []SMPMeshConfig  `json:"serviceMeshConfigs"`
	PerformanceTestResults []SMPTestResult  `json:"performanceTestResults"`
}

// SMPTestConfig is smp.PerformanceTestConfig.
type SMPTestConfig struct {
	SMPVersion string            `json:"smpVersion,omitempty"`
	ID         string            `json:"id,omitempty"`
	Name       string            `json:"name,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Clients    []SMPClient       `json:"clients,omitempty"`
	Duration   string            `json:"duration,omitempty"`
}

// SMPClient is smp.PerformanceTestConfig.Client: one load configuration.
type SMPClient struct {
	LoadGenerator string `json:"loadGenerator,omitempty"`
	Protocol      string `json:"protocol,omitempty"` // PROTOCOL_HTTP, PROTOCOL_TCP, PROTOCOL_GRPC
	Connections   int32  `json:"connections,omitempty"`
	RPS           int64  `json:"rps,omitempty,string"` // int64: a string in protobuf's JSON
}

// SMPTestResult is smp.PerformanceTestResult.
type SMPTestResult struct {
	SMPVersion   string            `json:"smpVersion,omitempty"`
	ID           string            `json:"id,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	StartTime    string            `json:"startTime,omitempty"`
	EndTime      string            `json:"endTime,omitempty"`
	LatenciesMs  *SMPLatency       `json:"latenciesMs,omitempty"`
	ActualQPS    float64           `json:"actualQps,omitempty"`
	DetailsURI   string            `json:"detailsUri,omitempty"`
	TestID       string            `json:"testId,omitempty"`
	MeshConfigID string            `json:"meshConfigId,omitempty"`
	EnvID        string            `json:"envId,omitempty"`
}

// SMPLatency is smp.PerformanceTestResult.Latency, milliseconds.
type SMPLatency struct {
	Min     float64 `json:"min,omitempty"`
	Average float64 `json:"average,omitempty"`
	P50     float64 `json:"p50,omitempty"`
	P90     float64 `json:"p90,omitempty"`
	P99     float64 `json:"p99,omitempty"`
	Max     float64 `json:"max,omitempty"`
}

// SMPMeshConfig is smp.ServiceMeshConfig.
type SMPMeshConfig struct {
	SMPVersion       string            `json:"smpVersion,omitempty"`
	ID               string            `json:"id,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Sidecar          *SMPProxies       `json:"sidecar,omitempty"`
	MeshControlPlane *SMPControlPlane  `json:"meshControlPlane,omitempty"`
	MTLSEnabled      bool              `json:"mtlsEnabled,omitempty"`
	MeshBuild        string            `json:"meshBuild,omitempty"`
	ProxyBuild       string            `json:"proxyBuild,omitempty"`
	MeshType         *SMPServiceMesh   `json:"meshType,omitempty"`
}

// SMPProxies is smp.ServiceMeshConfig.Sidecar: all the sidecars together.
type SMPProxies struct {
	Count     int32 `json:"count,omitempty"`
	CPUMcores int32 `json:"cpuMcores,omitempty"`
	MemMB     int32 `json:"memMb,omitempty"`
	RPS       int32 `json:"rps,omitempty"`
}

// SMPControlPlane is smp.ServiceMeshConfig.MeshControlPlane.
type SMPControlPlane struct {
	Count int32 `json:"count,omitempty"`
}

// SMPServiceMesh is smp.ServiceMesh: the mesh's type and version.
type SMPServiceMesh struct {
	Type    string `json:"type,omitempty"` // smp.ServiceMesh.Type's name: ISTIO, LINKERD, ...
	Version string `json:"version,omitempty"`
}

// SMPEnvironment is smp.EnvironmentConfig.
type SMPEnvironment struct {
	SMPVersion string            `json:"smpVersion,omitempty"`
	ID         string            `json:"id,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Nodes      []SMPNode         `json:"nodes,omitempty"`
}

// SMPNode is smp.EnvironmentConfig.Node.
type SMPNode struct {
	Type  string `json:"type,omitempty"`
	Cores int32  `json:"cores,omitempty"`
	MemMB int64  `json:"memMb,omitempty,string"` // int64: a string in protobuf's JSON
}

// WriteSMP writes the runs as one SMPDocument, indented.
func WriteSMP(w io.Writer, runs []results.Run) error {
	doc := SMP(runs)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write SMP document: %w", err)
	}
	return nil
}

// SMP maps the runs to SMP's messages: one PerformanceTestConfig for them
// all (a client per load configuration), and per run a
// PerformanceTestResult and the ServiceMeshConfig it ran with (SMP puts the
// proxies' CPU and memory there, and those are measured per run); an
// EnvironmentConfig per machine. What SMP has no field for goes into the
// messages' labels (docs/tracking.md lists them).
func SMP(runs []results.Run) SMPDocument {
	doc := SMPDocument{
		PerformanceTestConfig:  testConfig(runs),
		EnvironmentConfigs:     []SMPEnvironment{},
		ServiceMeshConfigs:     []SMPMeshConfig{},
		PerformanceTestResults: []SMPTestResult{},
	}
	envs := map[string]bool{}
	for _, r := range runs {
		env := environment(r)
		if !envs[env.ID] {
			envs[env.ID] = true
			doc.EnvironmentConfigs = append(doc.EnvironmentConfigs, env)
		}
		id := ResultID(r)
		mesh := meshConfig(r, id+"/mesh")
		doc.ServiceMeshConfigs = append(doc.ServiceMeshConfigs, mesh)
		res := testResult(r, id)
		res.TestID, res.MeshConfigID, res.EnvID = doc.PerformanceTestConfig.ID, mesh.ID, env.ID
		doc.PerformanceTestResults = append(doc.PerformanceTestResults, res)
	}
	return doc
}

// ResultID names a run uniquely within its invocation: a run id groups
// every mode, rate, connection count and repetition of one invocation.
func ResultID(r results.Run) string {
	qps := "max"
	if r.RequestedQPS > 0 {
		qps = strconv.Itoa(r.RequestedQPS)
	}
	return fmt.Sprintf("%s/%s/qps-%s/c-%d/rep-%d", runName(r), cmp.Or(r.Mode, UnknownMode), qps, r.Connections, r.Repetition)
}

// ResultName is ResultID as one path segment (its slashes made
// underscores): the name of the run's Fortio JSON file as export writes
// it, without ".json", and the run's name in the dashboard's addresses.
func ResultName(r results.Run) string {
	return strings.ReplaceAll(ResultID(r), "/", "_")
}

// runName is the run's id, or for a result file read without the store
// (which has none) the file's name.
func runName(r results.Run) string {
	return cmp.Or(r.RunID, strings.TrimSuffix(filepath.Base(r.FortioJSON), filepath.Ext(r.FortioJSON)))
}

// testConfig is the one PerformanceTestConfig: named after the runs'
// invocations and scenarios, a client per (load generator, protocol,
// connections, rate), the longest run's duration.
func testConfig(runs []results.Run) SMPTestConfig {
	var ids, scenarios []string
	var longest time.Duration
	clients := map[SMPClient]bool{}
	for _, r := range runs {
		ids = append(ids, runName(r))
		scenarios = append(scenarios, r.Scenario)
		longest = max(longest, r.Duration)
		clients[SMPClient{LoadGenerator: loadGenerator(r), Protocol: smpProtocol(r.Protocol),
			Connections: int32(r.Connections), RPS: int64(r.RequestedQPS)}] = true
	}
	ids, scenarios = sortedUnique(ids), sortedUnique(scenarios)
	c := SMPTestConfig{
		SMPVersion: SMPVersion,
		ID:         "meshperf/" + strings.Join(ids, "+"),
		Name:       strings.Join(scenarios, ", "),
		Labels:     map[string]string{"run_ids": strings.Join(ids, ","), "scenarios": strings.Join(scenarios, ",")},
		Clients: slices.SortedFunc(maps.Keys(clients), func(a, b SMPClient) int {
			return cmp.Or(cmp.Compare(a.LoadGenerator, b.LoadGenerator), cmp.Compare(a.Protocol, b.Protocol),
				cmp.Compare(a.Connections, b.Connections), cmp.Compare(a.RPS, b.RPS))
		}),
	}
	if longest > 0 {
		c.Duration = longest.Round(time.Second).String()
	}
	return c
}

// loadGenerator names what made the run's load: meshperf's own load
// generator, unless the run was imported from another tool's result, whose
// provenance names that tool and its version ("fortio 1.66.5").
func loadGenerator(r results.Run) string {
	v := r.Provenance.Meshperf.Version
	for _, tool := range []string{"fortio", "nighthawk"} {
		if strings.HasPrefix(v, tool+" ") || v == tool {
			return v
		}
	}
	return "meshperf"
}

// smpProtocol is PerformanceTestConfig.Client.Protocol's name for the run's
// protocol: SMP has HTTP (HTTP/1.1 and h2 alike), TCP, UDP and GRPC.
func smpProtocol(p string) string {
	switch p {
	case "grpc":
		return "PROTOCOL_GRPC"
	case "tcp":
		return "PROTOCOL_TCP"
	case "":
		return ""
	}
	return "PROTOCOL_HTTP"
}

// testResult is the run's PerformanceTestResult. Its labels hold what the
// result has no field for: the run's place in its invocation, its error
// count, the latencies beyond P99, and the apps' own CPU and memory.
func testResult(r results.Run, id string) SMPTestResult {
	l := r.Latency
	res := SMPTestResult{
		SMPVersion: SMPVersion,
		ID:         id,
		ActualQPS:  results.OrZero(r.ActualQPS),
		LatenciesMs: &SMPLatency{Min: nanos(l.Min), Average: nanos(l.Avg), P50: nanos(l.P50),
			P90: nanos(l.P90), P99: nanos(l.P99), Max: nanos(l.Max)},
		Labels: map[string]string{
			"run_id":                   r.RunID,
			"scenario":                 r.Scenario,
			"mode":                     r.Mode,
			"protocol":                 r.Protocol,
			"repetition":               strconv.Itoa(r.Repetition),
			"connections":              strconv.Itoa(r.Connections),
			"requested_qps":            requestedQPS(r.RequestedQPS),
			"network":                  r.Network,
			"calls":                    strconv.FormatInt(r.Calls, 10),
			"errors":                   strconv.FormatInt(r.Errors, 10),
			"error_percent":            number(r.ErrorPercent),
			"payload_bytes":            strconv.Itoa(r.PayloadSize),
			"coordinated_omission_fix": strconv.FormatBool(r.Corrected),
			"p75_ms":                   number(l.P75),
			"p999_ms":                  number(l.P999),
			"p9999_ms":                 number(l.P9999),
			"istio_label":              r.Label,
		},
	}
	if (res.LatenciesMs == &SMPLatency{}) {
		res.LatenciesMs = nil
	}
	if !r.StartTime.IsZero() {
		res.StartTime = timestamp(r.StartTime)
		res.EndTime = timestamp(r.StartTime.Add(r.Duration))
	}
	// A URI needs an absolute path; a relative one is relative to where
	// the run was made, which the reader may not know.
	if filepath.IsAbs(r.FortioJSON) {
		res.DetailsURI = (&url.URL{Scheme: "file", Path: r.FortioJSON}).String()
	} else {
		res.Labels["fortio_json"] = r.FortioJSON
	}
	if r.Failed {
		res.Labels["failure_reason"] = r.FailureReason
	}
	for _, p := range r.Processes {
		if p.ProxyKind() == "" { // the apps: the load generator and the echo server
			res.Labels[p.Role+"_cpu_mcores"] = number(p.VCPU * 1000)
			res.Labels[p.Role+"_mem_mb"] = number(p.RSSMB)
		}
	}
	pv := r.Provenance
	res.Labels["meshperf_version"] = pv.Meshperf.Version
	res.Labels["meshperf_commit"] = pv.Meshperf.Commit
	res.Labels["params_hash"] = pv.ParamsHash
	res.Labels["labels"] = pv.Labels
	deleteEmpty(res.Labels)
	return res
}

// meshConfig is the ServiceMeshConfig the run measured. SMP's sidecar
// figures cover the sidecars; the ambient modes' node proxies and
// waypoint, which SMP has no message for, go into labels.
func meshConfig(r results.Run, id string) SMPMeshConfig {
	pv := r.Provenance
	m := SMPMeshConfig{
		SMPVersion:  SMPVersion,
		ID:          id,
		MTLSEnabled: r.MTLS,
		MeshBuild:   build(pv.ControlPlane),
		ProxyBuild:  build(pv.DataPlane),
		Labels: map[string]string{
			"mode":          r.Mode,
			"data_plane":    pv.DataPlane.Name,
			"control_plane": pv.ControlPlane.Name,
		},
	}
	if p, ok := proxies(r, results.ProxySidecar); ok {
		m.Sidecar = &p
	}
	for _, kind := range []string{results.ProxyNodeProxy, results.ProxyWaypoint} {
		if p, ok := proxies(r, kind); ok {
			key := strings.ReplaceAll(kind, " ", "_")
			m.Labels[key+"_count"] = strconv.Itoa(int(p.Count))
			m.Labels[key+"_cpu_mcores"] = strconv.Itoa(int(p.CPUMcores))
			m.Labels[key+"_mem_mb"] = strconv.Itoa(int(p.MemMB))
		}
	}
	if pv.ControlPlane.Name != "" {
		m.MeshControlPlane = &SMPControlPlane{Count: 1}
	}
	if t := meshType(pv.DataPlane.Name, pv.ControlPlane.Name); t != "" {
		m.MeshType = &SMPServiceMesh{Type: t, Version: cmp.Or(pv.ControlPlane.Version, pv.DataPlane.Version)}
	}
	deleteEmpty(m.Labels)
	return m
}

// proxies sums the run's proxies of one kind: their count, CPU in
// millicores and resident memory in MiB, and the run's actual rate, which
// each of them carries.
func proxies(r results.Run, kind string) (SMPProxies, bool) {
	var p SMPProxies
	var cpu, mem float64
	for _, proc := range r.Processes {
		if proc.ProxyKind() == kind {
			p.Count++
			cpu += results.OrZero(proc.VCPU) * 1000
			mem += results.OrZero(proc.RSSMB)
		}
	}
	if p.Count == 0 {
		return p, false
	}
	p.CPUMcores, p.MemMB = int32(math.Round(cpu)), int32(math.Round(mem))
	p.RPS = int32(math.Round(results.OrZero(r.ActualQPS)))
	return p, true
}

// meshType is smp.ServiceMesh.Type's name for the mesh under test, "" for
// none. meshperf's own control plane and proxy serve Istio's API (Istio's
// configuration in, xDS out, Istio's HBONE), so they are ISTIO to SMP; the
// labels name them.
func meshType(dataPlane, controlPlane string) string {
	name := strings.ToLower(controlPlane + " " + dataPlane)
	for _, m := range []struct{ word, smp string }{
		{"istio", "ISTIO"}, {"meshperf", "ISTIO"}, {"ztunnel", "ISTIO"}, {"envoy", "ISTIO"},
		{"linkerd", "LINKERD"}, {"consul", "CONSUL"}, {"kuma", "KUMA"}, {"app mesh", "APP_MESH"},
		{"traefik", "TRAEFIK_MESH"}, {"osm", "OPEN_SERVICE_MESH"}, {"open service mesh", "OPEN_SERVICE_MESH"},
		{"nginx", "NGINX_SERVICE_MESH"}, {"cilium", "CILIUM_SERVICE_MESH"}, {"tanzu", "TANZU"},
		{"network service mesh", "NETWORK_SERVICE_MESH"}, {"octarine", "OCTARINE"},
	} {
		if strings.Contains(name, m.word) {
			return m.smp
		}
	}
	return ""
}

// build is a component as one line: name, version and commit; "" for
// none, which SMP leaves out.
func build(c results.Component) string {
	if c.Name == "" {
		return ""
	}
	return c.Describe()
}

// environment is the EnvironmentConfig of the run's machine: one node, as
// the lab's pods are network namespaces (or loopback addresses) on one
// host; no Kubernetes. Its id is the machine's key, so that runs on
// comparable machines share it.
func environment(r results.Run) SMPEnvironment {
	m := r.Provenance.Machine
	env := SMPEnvironment{
		SMPVersion: SMPVersion,
		ID:         "machine/" + cmp.Or(m.Key(), "unknown"),
		Labels: map[string]string{
			"hostname": m.Hostname,
			"kernel":   m.Kernel,
			"pods":     r.Network,
		},
	}
	if m.Key() != "" {
		env.Nodes = []SMPNode{{Type: m.CPUModel, Cores: int32(m.CPUs), MemMB: int64(m.MemoryMB)}}
	}
	deleteEmpty(env.Labels)
	return env
}

func requestedQPS(q int) string {
	if q <= 0 {
		return "max"
	}
	return strconv.Itoa(q)
}

// timestamp is google.protobuf.Timestamp's JSON form: RFC 3339 in UTC,
// with 0, 3, 6 or 9 fractional digits, as protobuf's own encoders write it.
func timestamp(t time.Time) string {
	t = t.UTC()
	switch ns := t.Nanosecond(); {
	case ns == 0:
		return t.Format("2006-01-02T15:04:05Z")
	case ns%1e6 == 0:
		return t.Format("2006-01-02T15:04:05.000Z")
	case ns%1e3 == 0:
		return t.Format("2006-01-02T15:04:05.000000Z")
	}
	return t.Format("2006-01-02T15:04:05.000000000Z")
}

// nanos is a latency in ms rounded to the nanosecond, which is as fine as
// any load generator measures: the seconds-to-ms conversion's float noise
// (0.5469999999999999) goes.
func nanos(ms float64) float64 { return math.Round(results.OrZero(ms)*1e6) / 1e6 }

// number writes a figure for a label, "" (the label left out) when unknown.
func number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func deleteEmpty(labels map[string]string) {
	maps.DeleteFunc(labels, func(_, v string) bool { return v == "" })
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
