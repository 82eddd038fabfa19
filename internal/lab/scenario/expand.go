package scenario

import (
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// RunSpec is one run of the matrix with every parameter resolved.
type RunSpec struct {
	Index      int // position in Expand's order, from 0
	Total      int // number of runs in the matrix
	Scenario   string
	Repetition int // from 1
	Mode       Mode
	Protocol   Protocol
	// Connections is the load generator's -c; QPS its -qps (0: as fast as
	// possible), the total rate across connections.
	Connections int
	QPS         int
	Duration    time.Duration // load time, warm-up included
	Warmup      time.Duration // excluded from CPU/memory sampling
	Cooldown    time.Duration // idle after the run
	Timeout     time.Duration
	PayloadSize int
	// MTLS is whether this run's traffic is mutual TLS: the scenario asked for
	// it and both pods have a sidecar, or the mode is an ambient one (HBONE).
	MTLS             bool
	AccessLog        bool
	ProxyConcurrency int
	ProxyCPULimit    float64 // CPUs per proxy; 0: no limit
	Jitter, Uniform  bool
}

// Expand returns the run matrix: for each repetition, for each mode (in the
// scenario's order), for each connection count, for each rate. Modes are the
// outer loop within a repetition because changing mode means re-plumbing the
// pods, the expensive step; a repetition is the outermost loop so that a
// slow drift of the machine (thermal, other tenants) spreads over all modes
// instead of biasing the mode that happened to run last.
func (s *Scenario) Expand() []RunSpec {
	total := s.Repetitions * len(s.Modes) * len(s.Connections) * len(s.QPS)
	specs := make([]RunSpec, 0, total)
	for rep := 1; rep <= s.Repetitions; rep++ {
		for _, m := range s.Modes {
			for _, c := range s.Connections {
				for _, q := range s.QPS {
					specs = append(specs, s.spec(len(specs), total, rep, m, c, q))
				}
			}
		}
	}
	return specs
}

// SpecAt is one run of the scenario outside its matrix: mode m with
// connections and qps, repetition rep (from 1), the scenario's other
// values. A capacity sweep (lab sweep) picks its rates as it goes, so it
// has no matrix to expand.
func (s *Scenario) SpecAt(m Mode, connections, qps, rep int) RunSpec {
	return s.spec(0, 1, rep, m, connections, qps)
}

func (s *Scenario) spec(i, total, rep int, m Mode, c, q int) RunSpec {
	return RunSpec{
		Index: i, Total: total, Scenario: s.Name, Repetition: rep,
		Mode: m, Protocol: s.Protocol, Connections: c, QPS: q,
		Duration: s.Duration.D(), Warmup: s.Warmup.D(), Cooldown: s.Cooldown.D(),
		Timeout: s.Timeout.D(), PayloadSize: s.PayloadSize,
		MTLS:             s.MTLS && m == BothSidecars || m.AlwaysMTLS(),
		AccessLog:        s.AccessLog,
		ProxyConcurrency: s.ProxyConcurrency,
		ProxyCPULimit:    s.ProxyCPULimit,
		Jitter:           s.Jitter, Uniform: s.Uniform,
	}
}

// EstimatedDuration is the load and cool-down time of the whole matrix; pod
// and sidecar start-up come on top (a few seconds per mode).
func (s *Scenario) EstimatedDuration() time.Duration {
	return Remaining(s.Expand(), 0)
}

// Remaining is the load and cool-down time of specs[from:], for a progress
// display's "time left".
func Remaining(specs []RunSpec, from int) time.Duration {
	var d time.Duration
	for _, r := range specs[min(max(from, 0), len(specs)):] {
		d += r.Duration + r.Cooldown
	}
	return d
}

// Label is the run's label in Istio's form,
// <runid>_qps_<qps>_c_<connections>_<size>_<mode>, with the mode spelled as
// Istio's runner spells it (see Mode.IstioLabel); "max" stands for an
// unlimited rate. Istio's runner also puts a telemetry-mode word before the
// mode; we leave it out, as the form does, so the mode is still the
// last '_' field that Istio's scripts split on.
func (r RunSpec) Label(runID string) string {
	q := "max"
	if r.QPS > 0 {
		q = strconv.Itoa(r.QPS)
	}
	return runID + "_qps_" + q + "_c_" + strconv.Itoa(r.Connections) + "_" +
		strconv.Itoa(r.PayloadSize) + "_" + r.Mode.IstioLabel()
}

// LoadArgs are the `meshperf load` flags for this run, before the target:
// rate, connections, duration, timeout, jitter/uniform, labels, the JSON
// output file, and what the protocol needs (-h2; -grpc -ping and the payload
// for gRPC; the payload size for TCP). The percentiles include 99.99, which
// the results' CSV reports. For http and h2 the echo server's response size
// goes in the target's query (EchoPath), not in a flag.
func (r RunSpec) LoadArgs(label, jsonPath string) []string {
	args := []string{
		"-qps", strconv.Itoa(r.QPS),
		"-c", strconv.Itoa(r.Connections),
		"-t", r.Duration.String(),
		"-timeout", r.Timeout.String(),
		"-jitter=" + strconv.FormatBool(r.Jitter),
		"-uniform=" + strconv.FormatBool(r.Uniform),
		"-p", results.SpectrumFlag(),
		"-labels", label,
		"-json", jsonPath,
		"-quiet",
	}
	switch r.Protocol {
	case H2:
		args = append(args, "-h2")
	case GRPC:
		args = append(args, "-grpc", "-ping", "-payload-size", strconv.Itoa(r.PayloadSize))
	case TCP:
		args = append(args, "-payload-size", strconv.Itoa(r.PayloadSize))
	}
	return args
}

// EchoPath is the HTTP path and query that make the echo server answer with
// PayloadSize bytes, as Istio's harness asks Fortio's server (?size=).
func (r RunSpec) EchoPath() string {
	return "/echo?size=" + strconv.Itoa(r.PayloadSize)
}
