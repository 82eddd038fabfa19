package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// survives Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.good.*")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Decode("fuzz.yaml", data)
		if err != nil {
			if rs != nil {
				t.Fatalf("resources returned with error %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		for _, r := range rs {
			js, err := Encode(r)
			if err != nil {
				t.Fatalf("Encode(%s): %v", r.Key(), err)
			}
			back, err := Decode("encoded.json", js)
			if err != nil {
				t.Fatalf("Decode(Encode(%s)): %v\n%s", r.Key(), err, js)
			}
			if len(back) != 1 || !Equal(r, back[0]) {
				t.Fatalf("round trip changed %s:\n%s", r.Key(), js)
			}
		}
	})
}

// BenchmarkDecode decodes a 100-document file of the kinds a mesh has most
// of: Services, VirtualServices and DestinationRules.
func BenchmarkDecode(b *testing.B) {
	var sb strings.Builder
	for i := range 100 {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&sb, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: ns-%d, labels: {app: svc-%d}}\nspec:\n  selector: {app: svc-%d}\n  ports:\n  - {name: http, port: 8080, targetPort: 8080}\n  - {name: grpc, port: 9090}\n---\n", i, i%10, i, i)
		case 1:
			fmt.Fprintf(&sb, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs-%d, namespace: ns-%d}\nspec:\n  hosts: [svc-%d]\n  http:\n  - match: [{uri: {prefix: /api}, headers: {x-user: {exact: test}}}]\n    route:\n    - {destination: {host: svc-%d, subset: v1}, weight: 90}\n    - {destination: {host: svc-%d, subset: v2}, weight: 10}\n    timeout: 5s\n    retries: {attempts: 3, perTryTimeout: 1s}\n---\n", i, i%10, i, i, i)
		default:
			fmt.Fprintf(&sb, "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: dr-%d, namespace: ns-%d}\nspec:\n  host: svc-%d\n  trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}, outlierDetection: {consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}}\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}}\n---\n", i, i%10, i)
		}
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rs, err := Decode("bench.yaml", data)
		if err != nil || len(rs) != 100 {
			b.Fatalf("decoded %d resources: %v", len(rs), err)
		}
	}
}
