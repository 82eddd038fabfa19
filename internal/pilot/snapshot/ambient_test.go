package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/registry"
	"github.com/meshperf/meshperf/internal/testutil"
)

var nodeProxy = &model.Proxy{ID: "ztunnel~10.0.0.2~ztunnel-a.istio-system~istio-system.svc.cluster.local",
	Type: model.Ztunnel, Namespace: "istio-system", PodName: "ztunnel-a", IPAddresses: []string{"10.0.0.2"}}

// buildFrom decodes YAML files from testdata and builds a snapshot of them.
func buildFrom(t *testing.T, files ...string) *Snapshot {
	t.Helper()
	var rs []*config.Resource
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := config.Decode(f, data)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, decoded...)
	}
	reg := registry.New(registry.Options{}, func(registry.InboundType, *model.PushRequest) {})
	for _, r := range rs {
		reg.Update(nil, r)
	}
	return Build(Input{Version: "1", Resources: rs, Registry: reg.Snapshot(), Mesh: config.DefaultMeshConfig()})
}

// goldenAmbient writes what a node proxy is sent, both WDS types, each
// resource's name then its body, and compares it with testdata/golden/NAME.json.
func goldenAmbient(t *testing.T, name string, s *Snapshot) {
	t.Helper()
	var buf bytes.Buffer
	for _, typ := range []string{AddressType, AuthorizationType} {
		rs, err := s.Generate(nodeProxy, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			buf.WriteString(r.Name + "\n")
			buf.Write(testutil.ProtoJSON(t, r.Body))
			buf.WriteString("\n")
		}
	}
	testutil.Golden(t, filepath.Join("testdata", "golden", name+".json"), buf.Bytes())
}

// Workloads in and out of the ambient mode, a Service and a ServiceEntry,
// STRICT mTLS in the enrolled namespace, ALLOW and DENY policies (an HTTP
// rule dropped from the ALLOW one, kept without its HTTP part in the DENY
// one, and a mesh-wide ALLOW left with no rule it can match).
func TestGoldenAmbientNodeProxy(t *testing.T) {
	goldenAmbient(t, "ambient-node-proxy", buildFrom(t, "ambient.yaml"))
}

func TestNodeProxyGetsOnlyWorkloadDiscovery(t *testing.T) {
	s := buildFrom(t, "ambient.yaml")
	if _, err := s.Generate(nodeProxy, ClusterType, nil); err == nil {
		t.Error("a node proxy was given clusters")
	}
	sidecar := proxy("shop", "cart-1", map[string]string{"app": "cart"})
	if _, err := s.Generate(sidecar, AddressType, nil); err == nil {
		t.Error("a sidecar was given workload addresses")
	}
}

func TestAmbientDigestFollowsContent(t *testing.T) {
	a, b := buildFrom(t, "ambient.yaml"), buildFrom(t, "ambient.yaml")
	da, err := a.AmbientDigest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.AmbientDigest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("two snapshots of the same config differ: %s, %s", da, db)
	}
	c := buildFrom(t, "ambient.yaml", "mesh.yaml")
	if dc, err := c.AmbientDigest(); err != nil || dc == da {
		t.Errorf("more services, same digest %s (%v)", dc, err)
	}
}

// Waypoint bindings in WDS: services bound by their namespace, their own
// label (also across namespaces), or opted out; a workload bound to a
// waypoint that serves workloads; the waypoint's own pod reached over HBONE
// with no waypoint of its own.
func TestGoldenAmbientWaypointBindings(t *testing.T) {
	goldenAmbient(t, "ambient-waypoint-node-proxy", buildFrom(t, "waypoint.yaml"))
}
