package driver

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/results"
)

// cploadParams are what define a control-plane load test's measurement,
// for its parameters hash: the mesh's shape and size, the simulated
// proxies, the xDS flavour, the scoping and knobs, and the churn with its
// rates; not the target's address, the output or the labels.
type cploadParams struct {
	Shape          string   `json:"shape"`
	Resources      int      `json:"resources"`
	Pods           int      `json:"pods"`
	Proxies        int      `json:"proxies"`
	Scoping        Scoping  `json:"scoping"`
	Exclude        []string `json:"exclude"`
	Knobs          Knobs    `json:"knobs"`
	Delta          bool     `json:"delta"`
	NoSDS          bool     `json:"no_sds"`
	External       bool     `json:"external"`
	Churn          string   `json:"churn"`
	Namespace      string   `json:"namespace"`
	Service        string   `json:"service"`
	Reps           int      `json:"reps"`
	Delay          string   `json:"delay"`
	Rate           float64  `json:"rate"`
	Duration       string   `json:"duration"`
	ConnectRate    float64  `json:"connect_rate"`
	ProxiesPerConn int      `json:"proxies_per_conn"`
	// Subject is left out when empty, so that cpload's own runs keep the
	// hash they had before benchmarks named theirs.
	Subject string `json:"subject,omitempty"`
}

// unknownControlPlane names an external control plane the user did not
// name with --mesh-name: there is one, meshperf cannot tell which.
const unknownControlPlane = "unknown"

// provenance is what the test's report and stored row record about it.
// The control plane is meshperf pilot when cpload started it, else the one
// --mesh-name and --mesh-version name. There is no data plane: the
// proxies are simulated, they only speak xDS.
func (c *Config) provenance(proxies int) (results.Provenance, error) {
	hash, err := results.ParamsHash(cploadParams{
		Shape: c.Shape, Resources: len(c.Mesh.All()), Pods: len(c.Mesh.Proxies), Proxies: proxies,
		Scoping: c.Scoping, Exclude: c.Exclude, Knobs: c.Knobs, Delta: c.Delta, NoSDS: c.NoSDS, External: c.Target != "",
		Churn: c.Churn, Namespace: c.Namespace, Service: c.Service, Reps: c.Reps, Delay: c.Delay.String(),
		Rate: c.Rate, Duration: c.Duration.String(), ConnectRate: c.ConnectRate, ProxiesPerConn: c.ProxiesPerConn,
		Subject: c.Subject,
	})
	if err != nil {
		return results.Provenance{}, fmt.Errorf("cpload: %w", err)
	}
	p := results.Provenance{Meshperf: results.ThisBuild(), ParamsHash: hash, Labels: c.Labels, Machine: results.LocalMachine()}
	switch {
	case c.Target == "":
		p.ControlPlane = p.Meshperf.Component(results.ComponentPilot)
	case c.MeshName != "":
		p.ControlPlane = results.ExternalMesh(c.MeshName, c.MeshVersion)
	default:
		p.ControlPlane = results.Component{Name: unknownControlPlane}
	}
	return p, nil
}
