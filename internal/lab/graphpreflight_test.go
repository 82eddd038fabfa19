package lab

import (
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

func parseGraphScenario(t *testing.T, yaml string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse("g.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A graph too big for the lab's /24, or for the memory that is free, is
// refused with the count or the estimate, in one line.
func TestPreflightGraphRefusals(t *testing.T) {
	const plenty = "MemTotal: 32000000 kB\nMemAvailable: 30000000 kB\n"
	cases := []struct {
		name, scenario, meminfo string
		kind                    pod.Kind
		want                    string
	}{
		{"loopback", "topology: chain-5\nconnections: [1]\nqps: [1]\n", plenty, pod.KindLoopback,
			"topology chain-5 needs network namespaces (one pod per replica, each with the service port 8080); run meshperf lab as root, without -network loopback"},
		{"too many pods", "topology: tree-13\nreplicas: 20\nconnections: [1]\nqps: [1]\n", plenty, pod.KindNetns,
			"topology tree-13 needs 260 pods, more than the 250 a lab network holds; lower replicas or numReplicas"},
		{"memory with sidecars", "topology: tree-13\nreplicas: 8\nconnections: [1]\nqps: [1]\n",
			"MemTotal: 4000000 kB\nMemAvailable: 1048576 kB\n", pod.KindNetns,
			"topology tree-13 needs ~105 pods x 20 MB = 2.1 GB, 1.0 GB is free; lower replicas or numReplicas"},
		{"memory without sidecars", "topology: tree-13\nreplicas: 8\nconnections: [1]\nqps: [1]\nmodes: [no-mesh]\n",
			"MemAvailable: 524288 kB\n", pod.KindNetns,
			"topology tree-13 needs ~105 pods x 14 MB = 1.4 GB, 0.5 GB is free; lower replicas or numReplicas"},
		{"no MemAvailable", "topology: chain-5\nconnections: [1]\nqps: [1]\n", "MemTotal: 1 kB\n", pod.KindNetns,
			"/proc/meminfo has no MemAvailable line to check the graph's memory against"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := preflightGraph(parseGraphScenario(t, c.scenario), c.kind, c.meminfo)
			if err == nil || err.Error() != c.want {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
	// The same graph fits when the memory is there.
	if err := preflightGraph(parseGraphScenario(t, cases[2].scenario), pod.KindNetns, plenty); err != nil {
		t.Errorf("104 pods with 30 GB free: %v", err)
	}
}
