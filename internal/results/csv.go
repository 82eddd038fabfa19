package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// IstioColumns are Istio's benchmark CSV columns, in the order of its
// tooling (perf/benchmark/runner/fortio.py and the graph plotter):
// latencies are whole microseconds, ActualDuration whole seconds,
// RequestedQPS 99999999 for "max", ActualQPS rounded, CPU in millicores and
// memory in MiB of the client and server proxies, "-" where a value does not
// exist (no proxy in that pod).
var IstioColumns = []string{
	"Labels", "StartTime", "RequestedQPS", "ActualQPS", "NumThreads", "RunType", "ActualDuration",
	"min", "max", "p50", "p75", "p90", "p99", "p999",
	"cpu_mili_avg_istio_proxy_fortioclient", "cpu_mili_avg_istio_proxy_fortioserver",
	"mem_Mi_avg_istio_proxy_fortioclient", "mem_Mi_avg_istio_proxy_fortioserver",
	"errorPercent", "Payload",
}

// ExtraColumns are meshperf's, after Istio's: p99.99 (µs), the mean
// sidecar's vCPU per 1000 rps and RSS (MiB), whether latency is corrected for
// coordinated omission, and what Istio's label encodes or leaves out; then
// the run's provenance: meshperf's version and commit ("-dirty" when built
// with uncommitted changes), the data and control plane under test with
// their versions and commits ("none" for no mesh), the parameters hash, the
// labels, and the machine as its Key (CPU model/CPUs/memory: equal keys,
// comparable runs).
var ExtraColumns = []string{
	"p9999", "vcpu_per_1k_rps_per_proxy", "mb_per_proxy", "co_corrected",
	"mode", "network", "mtls", "protocol", "scenario", "run_id", "repetition", "failed", "failure_reason",
	"meshperf_version", "meshperf_commit", "data_plane", "data_plane_version", "data_plane_commit",
	"control_plane", "control_plane_version", "control_plane_commit", "params_hash", "labels", "machine",
}

// istioMaxQPS is how Istio's CSV writes an unlimited requested rate.
const istioMaxQPS = 99999999

// WriteCSV writes a header and one row per run.
func WriteCSV(w io.Writer, runs []Run) error {
	cw := csv.NewWriter(w)
	header := append(append([]string(nil), IstioColumns...), ExtraColumns...)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	for _, r := range runs {
		if err := cw.Write(csvRow(r)); err != nil {
			return fmt.Errorf("write CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}

func csvRow(r Run) []string {
	reqQPS := r.RequestedQPS
	if reqQPS == 0 {
		reqQPS = istioMaxQPS
	}
	payload := r.PayloadSize
	if r.ResponseSize > 0 {
		// Istio's Payload is Fortio's average response size (Sizes.Avg).
		payload = int(r.ResponseSize)
	}
	l := r.Latency
	cpuC, cpuS, memC, memS := "-", "-", "-", "-"
	if p, ok := r.Process(RoleClientSidecar); ok {
		cpuC, memC = num(p.VCPU*1000), num(p.RSSMB)
	}
	if p, ok := r.Process(RoleServerSidecar); ok {
		cpuS, memS = num(p.VCPU*1000), num(p.RSSMB)
	}
	mb, _ := r.SidecarRSSMB()
	p := r.Provenance
	meshperfCommit := p.Meshperf.Component("").Commit
	return []string{
		r.Label, r.StartTime.Format(time.RFC3339Nano), strconv.Itoa(reqQPS),
		strconv.FormatInt(int64(math.Round(r.ActualQPS)), 10), strconv.Itoa(r.Connections),
		runType(r.Protocol), strconv.FormatInt(int64(r.Duration/time.Second), 10),
		micros(l.Min), micros(l.Max), micros(l.P50), micros(l.P75), micros(l.P90), micros(l.P99), micros(l.P999),
		cpuC, cpuS, memC, memS,
		num(r.ErrorPercent), strconv.Itoa(payload),
		micros(l.P9999), num(r.VCPUPer1000RPS()), num(mb), strconv.FormatBool(r.Corrected),
		r.Mode, r.Network, strconv.FormatBool(r.MTLS), r.Protocol, r.Scenario, r.RunID,
		strconv.Itoa(r.Repetition), strconv.FormatBool(r.Failed), r.FailureReason,
		p.Meshperf.Version, meshperfCommit, componentName(p, p.DataPlane), p.DataPlane.Version, p.DataPlane.Commit,
		componentName(p, p.ControlPlane), p.ControlPlane.Version, p.ControlPlane.Commit, p.ParamsHash, p.Labels, p.Machine.Key(),
	}
}

// componentName is c's name, "none" when the run had none (no-mesh), ""
// when the run recorded no provenance at all (stored before it was).
func componentName(p Provenance, c Component) string {
	if c.Name == "" && p.Meshperf.Version != "" {
		return "none"
	}
	return c.Name
}

// runType is Fortio's RunType for a protocol.
func runType(protocol string) string {
	switch protocol {
	case "grpc":
		return "GRPC"
	case "tcp":
		return "TCP"
	case "":
		return "-"
	}
	return "HTTP"
}

// micros writes milliseconds as Istio's whole microseconds (truncated, as
// its int() conversion does).
func micros(ms float64) string {
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return "-"
	}
	// The tiny bias keeps 0.3 ms from becoming 299 µs through float rounding.
	return strconv.FormatInt(int64(ms*1000+1e-6), 10)
}

func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatFloat(v, 'f', 4, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}
