package driver

import (
	"fmt"
	"slices"

	networking "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Scoping is how sidecars are scoped with Sidecar resources.
type Scoping string

// The scopings --sidecar takes.
const (
	ScopeNone      Scoping = "none"      // every sidecar imports everything
	ScopeMeshWide  Scoping = "mesh-wide" // the book's: istio-system/* and prometheus/*, REGISTRY_ONLY
	ScopeNamespace Scoping = "namespace" // a Sidecar per namespace: ./* and istio-system/*
)

// ParseScoping reads a --sidecar value.
func ParseScoping(s string) (Scoping, error) {
	switch Scoping(s) {
	case ScopeNone, ScopeMeshWide, ScopeNamespace:
		return Scoping(s), nil
	case "":
		return ScopeNone, nil
	}
	return "", fmt.Errorf("--sidecar %q: want none, mesh-wide or namespace", s)
}

// ExcludeLabel is the namespace label the generated discoverySelectors
// exclude, as the book's ch11/istio-discovery-selector.yaml does.
const ExcludeLabel = "istio-exclude"

// DiscoverySelectorsMeshConfig is the book's mesh config: every namespace
// not labelled istio-exclude=true.
const DiscoverySelectorsMeshConfig = `discoverySelectors:
- matchExpressions:
  - key: istio-exclude
    operator: NotIn
    values: ["true"]
`

// scopeResources are the Sidecars a scoping needs in mesh m.
func scopeResources(m *shape.Mesh, s Scoping) []*config.Resource {
	switch s {
	case ScopeMeshWide:
		return []*config.Resource{shape.MeshWideSidecar()}
	case ScopeNamespace:
		var out []*config.Resource
		for _, r := range m.All() {
			if r.Kind != config.KindNamespace || r.Meta.Name == shape.BookRootNamespace {
				continue
			}
			out = append(out, &config.Resource{Kind: config.KindSidecar, APIVersion: "networking.istio.io/v1",
				Meta: metav1.ObjectMeta{Name: "default", Namespace: r.Meta.Name},
				Spec: &networking.Sidecar{Egress: []*networking.IstioEgressListener{{Hosts: []string{"./*", "istio-system/*"}}}}})
		}
		return out
	}
	return nil
}

// excludedNamespace is a Namespace carrying the exclude label.
func excludedNamespace(name string) *config.Resource {
	return &config.Resource{Kind: config.KindNamespace, APIVersion: "v1",
		Meta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ExcludeLabel: "true"}}}
}

// imports says whether a sidecar in proxyNS sees services of ns.
func (s Scoping) imports(proxyNS, ns string) bool {
	switch s {
	case ScopeMeshWide:
		return ns == shape.BookRootNamespace || ns == shape.BookPromNamespace
	case ScopeNamespace:
		return ns == proxyNS || ns == shape.BookRootNamespace
	}
	return true
}

// audience is who must receive a change in a namespace: the sidecars whose
// scope imports it, and the ingress gateways; nobody for a namespace the
// discoverySelectors exclude.
func audience(specs []sim.ProxySpec, s Scoping, excluded []string) churn.Audience {
	return func(ns string) (sidecars, gateways []int) {
		if slices.Contains(excluded, ns) {
			return nil, nil
		}
		for i, p := range specs {
			switch {
			case p.Router && p.Labels["istio"] == "ingressgateway":
				gateways = append(gateways, i)
			case !p.Router && s.imports(p.Namespace, ns):
				sidecars = append(sidecars, i)
			}
		}
		return sidecars, gateways
	}
}

// pick keeps n of the specs, spread evenly (all when n is 0 or more).
func pick(specs []sim.ProxySpec, n int) []sim.ProxySpec {
	if n <= 0 || n >= len(specs) {
		return specs
	}
	out := make([]sim.ProxySpec, 0, n)
	for i := range n {
		out = append(out, specs[i*len(specs)/n])
	}
	return out
}
