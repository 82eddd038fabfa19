package snapshot

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

var update = flag.Bool("update", false, "rewrite the golden files from the generated config")

// goldenProxy writes a proxy's whole configuration (clusters, the endpoints
// they name, listeners, the routes they name) and compares it with
// testdata/golden/NAME.json.
func goldenProxy(t *testing.T, name string, s *Snapshot, p *model.Proxy) {
	t.Helper()
	var buf bytes.Buffer
	add := func(typ string, names []string) []Resource {
		rs, err := s.Generate(p, typ, names)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			b, err := protojson.Marshal(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, b, "", "  "); err != nil { // protojson's spacing varies on purpose
				t.Fatal(err)
			}
			buf.Write(out.Bytes())
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
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from the generated config; if intended, run go test ./internal/pilot/snapshot -update and review the diff", path)
	}
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
