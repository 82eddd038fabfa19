package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshperf/meshperf/internal/topology"
)

// MaxReplicas bounds the replicas key, as topology files bound
// numReplicas: a typo's extra zero, not a machine's limit (the lab checks
// pods and memory against the machine before it starts).
const MaxReplicas = 1000

// graphModes are the modes a scenario with a topology may run: every pod
// of the graph, the load generator's included, with no proxy, a sidecar
// each, or enrolled in the nodes' proxies. The one-sidecar modes have no
// meaning for a graph of many pods.
var graphModes = []Mode{NoMesh, BothSidecars, Ambient}

// defaultGraphModes run when a scenario with a topology names no modes:
// the baseline and the sidecar mesh, which need no more than the graph.
var defaultGraphModes = []Mode{NoMesh, BothSidecars}

// AppAcmeair is the app key's one value: the Acmeair-like airline app.
const AppAcmeair = "acmeair"

// IsGraph reports whether the scenario runs a service graph (a topology or
// an app) rather than the two-pod echo benchmark.
func (s *Scenario) IsGraph() bool { return s.Topology != "" || s.App != "" }

// resolveTopology reads the scenario's topology: a shipped topology's name,
// or a file, relative to the scenario file's directory dir. It applies
// replicas to every service, as Istio's load test scales a namespace.
func (s *Scenario) resolveTopology(dir string) error {
	if s.App != "" {
		// An app's graph is the app's to say (the lab asks it): this
		// package stays free of the apps' code, which scenarios do not need.
		return nil
	}
	arg := s.Topology
	if looksLikeFile(arg) && !filepath.IsAbs(arg) {
		arg = filepath.Join(dir, arg)
	}
	if looksLikeFile(arg) {
		abs, err := filepath.Abs(arg)
		if err != nil {
			return &FieldError{Field: "topology", Problem: err.Error()}
		}
		arg = abs
	}
	t, err := topology.Resolve(arg)
	if err != nil {
		return &FieldError{Field: "topology", Problem: err.Error()}
	}
	s.TopologySource = arg
	if s.Replicas > 0 {
		for i := range t.Services {
			t.Services[i].NumReplicas = s.Replicas
		}
	}
	s.Graph = t
	return nil
}

// looksLikeFile says whether a topology argument names a file rather than
// a shipped topology, as Load does for scenarios.
func looksLikeFile(arg string) bool {
	return strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.ContainsRune(arg, os.PathSeparator)
}

// validateGraph checks what a topology changes: http only, the graph
// modes only, replicas only with a topology.
func (s *Scenario) validateGraph() error {
	switch {
	case s.App != "" && s.App != AppAcmeair:
		return fieldErr("app", "%q is not one of %s", s.App, AppAcmeair)
	case s.App != "" && s.Topology != "":
		return fieldErr("app", "a scenario runs a topology or an app, not both")
	case s.App != "" && s.Replicas != 0:
		return fieldErr("replicas", "applies to a topology's services, not to app %s", s.App)
	}
	if !s.IsGraph() {
		if s.Replicas != 0 {
			return fieldErr("replicas", "applies to a topology's services; set topology too")
		}
		return nil
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		return fieldErr("replicas", "must be 1 to %d, got %d", MaxReplicas, s.Replicas)
	}
	if s.Protocol != HTTP {
		return fieldErr("protocol", "a graph's services speak http only, got %q", s.Protocol)
	}
	for i, m := range s.Modes {
		if !containsMode(graphModes, m) && knownMode(m) {
			return fieldErr(fmt.Sprintf("modes[%d]", i), "%s does not apply to a graph (every pod has a sidecar or none); use one of %s",
				m, joinNames(graphModes))
		}
	}
	return nil
}

func containsMode(ms []Mode, m Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}
