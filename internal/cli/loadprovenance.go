package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// loadParams are what define a load's measurement, for its parameters
// hash: where it goes, how fast, for how long, with what, and the
// percentiles it reports; not where the result is written or its labels.
type loadParams struct {
	Target             string    `json:"target"`
	Protocol           string    `json:"protocol"`
	QPS                float64   `json:"qps"`
	Connections        int       `json:"connections"`
	Duration           string    `json:"duration"`
	Exactly            int64     `json:"exactly"`
	Uniform            bool      `json:"uniform"`
	Jitter             bool      `json:"jitter"`
	NoCatchUp          bool      `json:"nocatchup"`
	Percentiles        []float64 `json:"percentiles"`
	PayloadBytes       int       `json:"payload_bytes"`
	Method             string    `json:"method"`
	ContentType        string    `json:"content_type"`
	Headers            []string  `json:"headers"`
	Timeout            string    `json:"timeout"`
	KeepAlive          bool      `json:"keepalive"`
	Streams            int       `json:"streams"`
	Ping               bool      `json:"ping"`
	PingDelay          string    `json:"ping_delay"`
	HealthService      string    `json:"health_service"`
	AbortOn            int       `json:"abort_on"`
	AllowInitialErrors bool      `json:"allow_initial_errors"`
}

// protocol names what the load speaks, from its target and flags.
func (f *loadFlags) protocol(target string) string {
	switch {
	case f.grpc:
		return "grpc"
	case strings.HasPrefix(target, "tcp://"):
		return "tcp"
	case f.h2:
		return "h2"
	case f.http10:
		return "http1.0"
	}
	return "http"
}

// loadProvenance is what the result records about itself: the -provenance
// object when given (its caller knows the mesh), else this meshperf, the
// mesh -mesh-name names as both data and control plane (a mesh such as
// Istio is both, at one version), the parameters' hash, -labels and this
// machine.
func (f *loadFlags) loadProvenance(target string, percentiles []float64, payloadBytes int) (results.Provenance, error) {
	if f.provenance != "" {
		var p results.Provenance
		dec := json.NewDecoder(bytes.NewReader([]byte(f.provenance)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return p, fmt.Errorf("-provenance: not a provenance JSON object: %v", err)
		}
		return p, nil
	}
	hash, err := results.ParamsHash(loadParams{
		Target: target, Protocol: f.protocol(target), QPS: f.qps, Connections: f.connections,
		Duration: f.duration.String(), Exactly: f.exactly, Uniform: f.uniform, Jitter: f.jitter, NoCatchUp: f.noCatchUp,
		Percentiles: percentiles, PayloadBytes: payloadBytes, Method: f.method, ContentType: f.contentType,
		Headers: []string(f.headers), Timeout: f.timeout.String(), KeepAlive: f.keepAlive, Streams: f.streams, Ping: f.ping,
		PingDelay: f.pingDelay.String(), HealthService: f.healthService, AbortOn: f.abortOn, AllowInitialErrors: f.allowInitialErrors,
	})
	if err != nil {
		return results.Provenance{}, err
	}
	mesh := results.ExternalMesh(f.meshName, f.meshVersion)
	return results.Provenance{
		Meshperf:  results.ThisBuild(),
		DataPlane: mesh, ControlPlane: mesh,
		ParamsHash: hash,
		Labels:     f.labels,
		Machine:    results.LocalMachine(),
	}, nil
}
