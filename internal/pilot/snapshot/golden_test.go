package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/testutil"
)

// goldenProxy writes a proxy's whole configuration (clusters, the endpoints
// they name, listeners, the routes they name) and compares it with
// testdata/golden/NAME.json (go test -update rewrites it).
func goldenProxy(t *testing.T, name string, s *Snapshot, p *model.Proxy) {
	t.Helper()
	var buf bytes.Buffer
	add := func(typ string, names []string) []Resource {
		rs, err := s.Generate(p, typ, names)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			buf.Write(testutil.ProtoJSON(t, r.Body))
			buf.WriteString("\n")
		}
		return rs
	}
	var eds, rds []string
	for _, c := range add(ClusterType, nil) {
		if len(c.Name) > 9 && c.Name[:9] == "outbound|" {
			eds = append(eds, c.Name)
		}
	}
	add(EndpointType, eds)
	for _, l := range add(ListenerType, nil) {
		if len(l.Name) > 8 && l.Name[:8] == "0.0.0.0_" {
			rds = append(rds, l.Name[8:])
		}
	}
	add(RouteType, rds)
	testutil.Golden(t, filepath.Join("testdata", "golden", name+".json"), buf.Bytes())
}

// The shop mesh: services in two namespaces, a DestinationRule with a subset,
// a VirtualService, STRICT mTLS in the namespace; no Sidecar.
func TestGoldenShopProxy(t *testing.T) {
	p := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	goldenProxy(t, "shop-cart-proxy", build(t, "", p), p)
}

// The same mesh locked down: a mesh-wide Sidecar importing only the proxy's
// namespace with REGISTRY_ONLY, and an external service reached through DNS.
func TestGoldenLockedDownProxy(t *testing.T) {
	extra, err := os.ReadFile("testdata/external.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	goldenProxy(t, "shop-cart-proxy-locked-down", build(t, string(extra), p), p)
}
