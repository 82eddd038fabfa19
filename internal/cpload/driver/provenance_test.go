package driver

import (
	"testing"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/results"
)

// The control plane is meshperf pilot when cpload starts it, the one
// --mesh-name names against --target, "unknown" when nothing names it; the
// parameters hash follows the churn's rate, not the target's address.
func TestProvenanceControlPlane(t *testing.T) {
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 1, ServicesPerNamespace: 2, Replicas: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Shape: "uniform", Mesh: m, Churn: ChurnEndpoints, Rate: 10, Labels: "tuned"}
	prov := func(change func(c *Config)) results.Provenance {
		t.Helper()
		c := base
		change(&c)
		p, err := c.provenance(2)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	own := prov(func(c *Config) {})
	if own.ControlPlane != results.ThisBuild().Component("meshperf-pilot") || own.DataPlane != (results.Component{}) || own.Labels != "tuned" {
		t.Errorf("own pilot: %+v", own)
	}
	istiod := prov(func(c *Config) { c.Target, c.MeshName, c.MeshVersion = "10.0.0.1:15010", "istiod", "1.24.0" })
	if istiod.ControlPlane != (results.Component{Name: "istiod", Version: "1.24.0"}) {
		t.Errorf("external istiod: %+v", istiod.ControlPlane)
	}
	unnamed := prov(func(c *Config) { c.Target = "10.0.0.2:15010" })
	if unnamed.ControlPlane.Name != "unknown" || unnamed.ParamsHash != istiod.ParamsHash {
		t.Errorf("unnamed target: %+v, params %s (want %s, as istiod's at another address)", unnamed.ControlPlane, unnamed.ParamsHash, istiod.ParamsHash)
	}
	if faster := prov(func(c *Config) { c.Rate = 20 }); faster.ParamsHash == own.ParamsHash {
		t.Errorf("params hash %s did not change with the rate", own.ParamsHash)
	}
}

// A control plane cpload starts admits the fleet's streams as fast as the
// fleet opens them, unless the user set its limit; an external target's
// limit is its own.
func TestAdmitTheFleet(t *testing.T) {
	mesh := &shape.Mesh{Proxies: make([]sim.ProxySpec, 300)}
	for _, c := range []struct {
		name string
		c    Config
		want float64
	}{
		{"unlimited connect rate: all of them", Config{Mesh: mesh, ConnectRate: -1}, 300},
		{"connect rate", Config{Mesh: mesh, ConnectRate: 40}, 40},
		{"default connect rate", Config{Mesh: mesh}, sim.DefaultConnectRate},
		{"set by the user", Config{Mesh: mesh, ConnectRate: -1, Knobs: Knobs{MaxRequestsPerSecond: 7}}, 7},
		{"external target", Config{Mesh: mesh, ConnectRate: -1, Target: "127.0.0.1:15010"}, 0},
	} {
		c.c.admitTheFleet()
		if got := c.c.Knobs.MaxRequestsPerSecond; got != c.want {
			t.Errorf("%s: PILOT_MAX_REQUESTS_PER_SECOND %g, want %g", c.name, got, c.want)
		}
	}
}
