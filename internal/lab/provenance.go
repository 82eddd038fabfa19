package lab

import (
	"fmt"
	"regexp"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// labProvenance is what every run of an invocation records about itself:
// the same meshperf, control plane, parameters, labels and machine
// throughout, and the data plane its mode puts on the path.
type labProvenance struct {
	common  results.Provenance // DataPlane left for forMode
	proxy   results.Component  // meshperf-proxy, as it says it is
	ztunnel results.Component  // the -ztunnel binary; Name "" without one
	// ztunnelNode is Config.ZtunnelNode: ztunnel on one node beside
	// meshperf-proxy on the other.
	ztunnelNode string
}

// newLabProvenance asks the proxies their versions and hashes the
// scenario's parameters; it fails when a binary cannot say what it is.
func newLabProvenance(cfg Config) (labProvenance, error) {
	hash, err := ScenarioParamsHash(cfg.Scenario)
	if err != nil {
		return labProvenance{}, fmt.Errorf("lab: %w", err)
	}
	p := labProvenance{common: results.Provenance{
		Meshperf:     results.ThisBuild(),
		ControlPlane: results.ThisBuild().Component(results.ComponentPilot),
		ParamsHash:   hash,
		Labels:       cfg.Labels,
		Machine:      results.LocalMachine(),
	}, ztunnelNode: cfg.ZtunnelNode}
	if p.proxy, err = ProxyComponent(cfg.ProxyBin); err != nil {
		return labProvenance{}, fmt.Errorf("lab: %w", err)
	}
	if cfg.ZtunnelBin != "" {
		if p.ztunnel, err = ztunnelComponent(cfg.ZtunnelBin); err != nil {
			return labProvenance{}, fmt.Errorf("lab: %w", err)
		}
	}
	return p, nil
}

// forMode is the provenance of a run in mode m: no mesh at all in no-mesh;
// else the lab's pilot, and as the data plane the proxy the mode measures:
// ztunnel as the node proxies of the ztunnel twins (their waypoint is
// still meshperf-proxy, the twin's point is the node proxy), both names
// when the interoperability set-up mixes them, meshperf-proxy otherwise.
func (p labProvenance) forMode(m scenario.Mode) results.Provenance {
	out := p.common
	switch {
	case m == scenario.NoMesh:
		out.ControlPlane = results.Component{}
	case m.Ztunnel():
		out.DataPlane = p.ztunnel
	case m.NodeProxies() && p.ztunnelNode != "" && p.ztunnel.Name != "":
		out.DataPlane = results.Component{Name: p.proxy.Name + "+" + p.ztunnel.Name,
			Version: p.proxy.Version + "+" + p.ztunnel.Version, Commit: p.proxy.Commit + "+" + p.ztunnel.Commit}
	default:
		out.DataPlane = p.proxy
	}
	return out
}

// ScenarioParamsHash identifies s's measurement (results.ParamsHash of
// measurementParams): equal on every network the scenario runs on.
func ScenarioParamsHash(s *scenario.Scenario) (string, error) {
	return results.ParamsHash(measurementParams(s))
}

// measurementParams is what defines a scenario's measurement, for its
// parameters hash: the matrix and every setting, after the command line's
// overrides; not its name and description, which do not change what is
// measured (a renamed copy of a file measures the same).
func measurementParams(s *scenario.Scenario) scenario.Scenario {
	params := *s
	params.Name, params.Description = "", ""
	return params
}

// proxyVersionRE reads meshperf-proxy's --version: "meshperf-proxy 0.1.0
// (commit 55537af...)", the commit with "-dirty" when its sources had
// uncommitted changes, "unknown" outside a checkout. Builds before the
// commit was recorded print the version alone.
var proxyVersionRE = regexp.MustCompile(`^meshperf-proxy (\S+)(?: \(commit ([^)\s]+)\))?\s*$`)

// ProxyComponent asks the meshperf-proxy at path what it is.
func ProxyComponent(path string) (results.Component, error) {
	_, m, err := askVersion(versionQuery{flagName: "-proxy", path: path, arg: "--version", answers: proxyVersionRE, as: results.ComponentProxy})
	if err != nil {
		return results.Component{}, err
	}
	c := results.Component{Name: results.ComponentProxy, Version: m[1], Commit: m[2]}
	if c.Commit == "unknown" {
		c.Commit = ""
	}
	return c, nil
}
