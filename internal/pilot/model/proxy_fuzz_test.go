package model

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Any node id is refused in one line of bounded length (a few prefixes,
// escaped) or read into a registration that passes Validate's field
// checks, never a panic: a client sends it before anything proves who it
// is. `go test ./internal/pilot/model -fuzz
// FuzzParseNodeID`.
func FuzzParseNodeID(f *testing.F) {
	for _, s := range []string{"sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", "ztunnel~10.0.0.1~ztunnel-x.istio-system~istio-system.svc.cluster.local",
		"waypoint~~w.lab~lab.svc.cluster.local", "sidecar~not-an-ip~a.b~b.svc.cluster.local", "sidecar~10.0.0.1~a.Bad_NS!~x",
		"router~fe80::1%eth0~a.b~b.svc", "~~~", "sidecar~10.0.0.1~a.b.c~c.svc.cluster.local~extra", strings.Repeat("~", 3) + strings.Repeat("x", 4000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, err := ParseNodeID(id)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || len(msg) > 4096 {
				t.Fatalf("ParseNodeID(%q): a message of %d bytes (%q); want one line quoting at most a prefix", id, len(msg), msg)
			}
			return
		}
		if len(validation.IsDNS1123Label(p.Namespace)) != 0 || len(validation.IsDNS1123Subdomain(p.PodName)) != 0 {
			t.Fatalf("ParseNodeID(%q) accepted namespace %q and pod %q", id, p.Namespace, p.PodName)
		}
		for _, ip := range p.IPAddresses {
			if a, err := netip.ParseAddr(ip); err != nil || a.Zone() != "" {
				t.Fatalf("ParseNodeID(%q) accepted address %q", id, ip)
			}
		}
	})
}
