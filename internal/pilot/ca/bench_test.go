package ca

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
)

// BenchmarkIssue is the cost of one certificate: key generation and signing.
// A whole mesh re-issues one per service account every 12h by default.
func BenchmarkIssue(b *testing.B) {
	for _, alg := range []KeyAlgorithm{ECDSAP256, RSA2048} {
		b.Run(string(alg), func(b *testing.B) {
			ca := mustOpen(b, b.TempDir(), WithKeyAlgorithm(alg))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ca.Issue("default", "sleep"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetCached is the cost a connecting proxy pays when its service
// account already has a certificate, with 1000 identities cached and every
// CPU asking at once.
func BenchmarkGetCached(b *testing.B) {
	ca := mustOpen(b, b.TempDir())
	const identities = 1000
	sas := make([]string, identities)
	for i := range sas {
		sas[i] = fmt.Sprintf("sa-%d", i)
		if _, err := ca.Get("default", sas[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := ca.Get("default", sas[i%identities]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkSDSSecret is building and marshalling the `default` secret, done
// once per proxy per push.
func BenchmarkSDSSecret(b *testing.B) {
	ca := mustOpen(b, b.TempDir())
	w, err := ca.Get("default", "sleep")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := proto.Marshal(w.SDSSecret()); err != nil {
			b.Fatal(err)
		}
	}
}
