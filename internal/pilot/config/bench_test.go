package config

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// BenchmarkDecodeEveryKind decodes and validates a 20-namespace mesh made
// of testdata/kinds.good.yaml (one object of every supported kind in its
// usual form: routes with matches and faults, subsets and pool settings,
// gateways with TLS, authorization rules) once per namespace: what
// `meshperf apply` and the file watcher do with a realistic config file.
// BenchmarkDecode measures the common kinds at scale.
func BenchmarkDecodeEveryKind(b *testing.B) {
	one, err := os.ReadFile("testdata/kinds.good.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var mesh bytes.Buffer
	for i := range 20 {
		ns := fmt.Appendf(nil, "team-%d", i)
		doc := bytes.ReplaceAll(bytes.ReplaceAll(one, []byte("bookinfo"), ns), []byte("namespace: shop"), append([]byte("namespace: shop-"), ns...))
		mesh.Write(doc)
		mesh.WriteString("\n---\n")
	}
	data := mesh.Bytes()
	want, err := Decode("kinds.good.yaml", one)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rs, err := Decode("mesh.yaml", data)
		if err != nil || len(rs) != 20*len(want) {
			b.Fatalf("decoded %d resources, want %d: %v", len(rs), 20*len(want), err)
		}
	}
}
