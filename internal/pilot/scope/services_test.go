package scope

import (
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func TestServicesFrom(t *testing.T) {
	older := serviceEntry("ext", "apis", []string{"a.example.com", "*.b.example.com"}, []string{"."}, 443)
	older.Meta.CreationTimestamp.Time = t0.Add(-time.Second)
	rs := []*config.Resource{
		kubeSvc("shop", "cart", " . , other ", 8080),
		older,
		virtualService("shop", "ignored", []string{"cart"}, nil, nil),
		{Kind: config.KindService, Spec: &networking.Sidecar{}}, // wrong spec type: skipped
		nil,
	}
	got := ServicesFrom(rs, "")
	if len(got) != 3 {
		t.Fatalf("got %d services, want 3: %+v", len(got), got)
	}
	// Oldest first: the ServiceEntry's two hosts, then the Service.
	if got[0].Hostname != "*.b.example.com" || got[1].Hostname != "a.example.com" || got[0].Key != older.Key() {
		t.Errorf("ServiceEntry hosts: %q %q key %v", got[0].Hostname, got[1].Hostname, got[0].Key)
	}
	if !got[0].ExportTo.Private || got[0].Ports[0] != 443 || got[0].Kubernetes {
		t.Errorf("ServiceEntry service: %+v", got[0])
	}
	cart := got[2]
	if cart.Hostname != "cart.shop.svc.cluster.local" || !cart.Kubernetes || cart.Namespace != "shop" ||
		cart.Ports[0] != 8080 || cart.Selector["app"] != "cart" {
		t.Errorf("Service: %+v", cart)
	}
	if !cart.ExportTo.Private || len(cart.ExportTo.Namespaces) != 1 || cart.ExportTo.Namespaces[0] != "other" {
		t.Errorf("annotation exportTo parsed as %+v", cart.ExportTo)
	}
	if h := ServicesFrom(rs[:1], "corp.internal")[0].Hostname; h != "cart.shop.svc.corp.internal" {
		t.Errorf("domain suffix: %q", h)
	}
}

func TestExportToAllows(t *testing.T) {
	cases := []struct {
		name     string
		exportTo []string
		owner    string
		ns       string
		want     bool
	}{
		{"empty defaults to all", nil, "a", "b", true},
		{"star", []string{"*"}, "a", "b", true},
		{"dot same namespace", []string{"."}, "a", "a", true},
		{"dot other namespace", []string{"."}, "a", "b", false},
		{"tilde hides everywhere", []string{"~"}, "a", "a", false},
		{"named namespace", []string{"b"}, "a", "b", true},
		{"named, other namespace", []string{"b"}, "a", "c", false},
		{"named does not include owner", []string{"b"}, "a", "a", false},
		{"dot and named", []string{".", "c"}, "a", "c", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseExportTo(c.exportTo).Allows(c.owner, c.ns); got != c.want {
				t.Errorf("%v from %s to %s = %v, want %v", c.exportTo, c.owner, c.ns, got, c.want)
			}
		})
	}
}

func TestExportedToReadsEachKind(t *testing.T) {
	cases := []struct {
		r    *config.Resource
		ns   string
		want bool
	}{
		{kubeSvc("a", "s", "."), "b", false},
		{kubeSvc("a", "s", ""), "b", true},
		{serviceEntry("a", "se", []string{"x.com"}, []string{"b"}), "b", true},
		{virtualService("a", "vs", []string{"x"}, nil, []string{"."}), "b", false},
		{virtualService("a", "vs", []string{"x"}, nil, []string{"."}), "a", true},
		{destRule("a", "dr", "x", "~"), "a", false},
		{destRule("a", "dr", "x"), "z", true},
	}
	for _, c := range cases {
		if got := ExportedTo(c.r, c.ns); got != c.want {
			t.Errorf("ExportedTo(%s, %s) = %v, want %v", c.r.Key(), c.ns, got, c.want)
		}
	}
}

func TestHostMatchingRules(t *testing.T) {
	cases := []struct {
		h, o            string
		subset, matches bool
	}{
		{"a.example.com", "a.example.com", true, true},
		{"a.example.com", "b.example.com", false, false},
		{"a.example.com", "*.example.com", true, true},
		{"a.example.com", "*", true, true},
		{"*.example.com", "*.example.com", true, true},
		{"*.example.com", "*.com", true, true},
		{"*.example.com", "*", true, true},
		// A wildcard service is not imported by one of its names, but a
		// wildcard route is imported by an egress host it covers.
		{"*.example.com", "a.example.com", false, true},
		{"*.com", "*.example.com", false, true},
		{"*.example.com", "*.other.com", false, false},
	}
	for _, c := range cases {
		if got := hostSubsetOf(c.h, c.o); got != c.subset {
			t.Errorf("hostSubsetOf(%q, %q) = %v", c.h, c.o, got)
		}
		if got := hostMatches(c.h, c.o); got != c.matches {
			t.Errorf("hostMatches(%q, %q) = %v", c.h, c.o, got)
		}
	}
}
