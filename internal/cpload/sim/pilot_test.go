package sim

import (
	"strconv"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/push"
)

// testMesh has two HTTP services, so proxies get EDS clusters and an RDS
// route configuration ("80"), plus a TCP one.
const testMesh = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec:
  selector: {app: cart}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ledger, namespace: shop}
spec:
  selector: {app: ledger}
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
`

// startPilot runs meshperf's control plane in-process with testMesh.
func startPilot(t *testing.T) (*discovery.Server, string) {
	return startPilotWith(t, nil)
}

func startPilotWith(t testing.TB, tune func(*push.Options)) (*discovery.Server, string) {
	t.Helper()
	rs, err := config.Decode("test.yaml", []byte(testMesh))
	if err != nil {
		t.Fatal(err)
	}
	return discoverytest.Start(t, tune, rs...)
}

func applyYAML(t *testing.T, s *discovery.Server, yaml string) {
	t.Helper()
	discoverytest.ApplyYAML(t, s, yaml)
}

// counter reads a counter of the control plane's registry, summed over the
// series whose label matches (all series if label is empty).
func counter(t *testing.T, s *discovery.Server, name, label, value string) float64 {
	t.Helper()
	mfs, err := s.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if match {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// specs makes n sidecars in shop, alternating between the cart and ledger
// workloads.
func specs(n int) []ProxySpec {
	out := make([]ProxySpec, n)
	for i := range out {
		app := []string{"cart", "ledger"}[i%2]
		out[i] = ProxySpec{
			Name: app + "-" + strconv.Itoa(i), Namespace: "shop", IP: "10.1." + strconv.Itoa((i+1)/256) + "." + strconv.Itoa((i+1)%256),
			Labels: map[string]string{"app": app}, ServiceAccount: app, WorkloadName: app,
		}
	}
	return out
}
