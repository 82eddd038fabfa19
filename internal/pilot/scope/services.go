package scope

import (
	"cmp"
	"slices"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// DefaultDomainSuffix is the cluster domain Kubernetes Service hostnames end in
// when none is configured, as in Istio.
const DefaultDomainSuffix = "cluster.local"

// ExportToAnnotation is the annotation a Kubernetes Service declares its
// visibility with, comma-separated, as Istio reads it.
const ExportToAnnotation = "networking.istio.io/exportTo"

// Service is one hostname a proxy can send traffic to: a Kubernetes Service, or
// one host of a ServiceEntry. Scopes import Services and depend on them.
type Service struct {
	// Key is the object the service came from; a ServiceEntry with several
	// hosts yields several Services with the same Key.
	Key       config.Key
	Hostname  string
	Namespace string
	// ExportTo is the declared visibility; empty means the mesh default.
	ExportTo ExportTo
	// Ports are the service's port numbers; egress listeners with a port
	// import only services that have it.
	Ports []uint32
	// Selector selects the workloads (pods, WorkloadEntries) behind the
	// service in its namespace: spec.selector of a Service, or
	// spec.workloadSelector.labels of a ServiceEntry. Nil selects none.
	Selector map[string]string
	// Kubernetes says the service is a v1 Service; for one hostname imported
	// from several namespaces Istio prefers it over a ServiceEntry.
	Kubernetes bool
	// Created is the source object's creation time; older wins ties.
	Created time.Time
}

// ServicesFrom derives the Services from the Service and ServiceEntry
// resources in rs (other kinds, and specs of the wrong type, are skipped),
// oldest first. A Service's hostname is NAME.NAMESPACE.svc.domainSuffix;
// domainSuffix defaults to cluster.local.
func ServicesFrom(rs []*config.Resource, domainSuffix string) []*Service {
	if domainSuffix == "" {
		domainSuffix = DefaultDomainSuffix
	}
	var out []*Service
	for _, r := range rs {
		if r == nil {
			continue
		}
		switch spec := r.Spec.(type) {
		case *corev1.ServiceSpec:
			if r.Kind != config.KindService || spec == nil {
				continue
			}
			svc := &Service{
				Key:        r.Key(),
				Hostname:   r.Meta.Name + "." + r.Meta.Namespace + ".svc." + domainSuffix,
				Namespace:  r.Meta.Namespace,
				ExportTo:   ParseExportTo(splitAnnotation(r.Meta.Annotations[ExportToAnnotation])),
				Selector:   spec.Selector,
				Kubernetes: true,
				Created:    r.Meta.CreationTimestamp.Time,
			}
			for _, p := range spec.Ports {
				svc.Ports = append(svc.Ports, uint32(p.Port))
			}
			out = append(out, svc)
		case *networking.ServiceEntry:
			if r.Kind != config.KindServiceEntry || spec == nil {
				continue
			}
			var ports []uint32
			for _, p := range spec.Ports {
				ports = append(ports, p.GetNumber())
			}
			exportTo := ParseExportTo(spec.ExportTo)
			for _, h := range spec.Hosts {
				out = append(out, &Service{
					Key:       r.Key(),
					Hostname:  h,
					Namespace: r.Meta.Namespace,
					ExportTo:  exportTo,
					Ports:     ports,
					Selector:  spec.GetWorkloadSelector().GetLabels(),
					Created:   r.Meta.CreationTimestamp.Time,
				})
			}
		}
	}
	slices.SortStableFunc(out, compareServices)
	return out
}

// compareServices orders services oldest first, then by name, so that every
// "first one wins" rule is deterministic.
func compareServices(a, b *Service) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Key.Name, b.Key.Name),
		strings.Compare(string(a.Key.Kind), string(b.Key.Kind)),
		strings.Compare(a.Hostname, b.Hostname),
	)
}

func splitAnnotation(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// ExportTo is a parsed exportTo list: "*" (every namespace), "." (the owner's
// namespace), "~" (none) and namespace names.
type ExportTo struct {
	Public     bool     // "*"
	Private    bool     // "."
	None       bool     // "~"
	Namespaces []string // named namespaces
}

// ParseExportTo reads an exportTo list as written in a spec or annotation.
func ParseExportTo(values []string) ExportTo {
	var e ExportTo
	for _, v := range values {
		switch v = strings.TrimSpace(v); v {
		case "":
		case "*":
			e.Public = true
		case ".":
			e.Private = true
		case "~":
			e.None = true
		default:
			e.Namespaces = append(e.Namespaces, v)
		}
	}
	return e
}

// IsEmpty says nothing was declared, so the mesh default applies.
func (e ExportTo) IsEmpty() bool {
	return !e.Public && !e.Private && !e.None && len(e.Namespaces) == 0
}

// Allows says whether an object in namespace owner with this exportTo is
// visible in namespace ns. Empty means "*", Istio's default; "~" contributes
// nothing, so "~" alone hides the object everywhere, its own namespace
// included.
func (e ExportTo) Allows(owner, ns string) bool {
	if e.IsEmpty() || e.Public {
		return true
	}
	if e.Private && owner == ns {
		return true
	}
	return slices.Contains(e.Namespaces, ns)
}

// orDefault returns e, or def when nothing was declared.
func (e ExportTo) orDefault(def ExportTo) ExportTo {
	if e.IsEmpty() {
		return def
	}
	return e
}

// ResourceExportTo returns the declared exportTo of a Service (annotation),
// ServiceEntry, VirtualService or DestinationRule; empty for anything else.
func ResourceExportTo(r *config.Resource) ExportTo {
	if r == nil {
		return ExportTo{}
	}
	switch spec := r.Spec.(type) {
	case *corev1.ServiceSpec:
		return ParseExportTo(splitAnnotation(r.Meta.Annotations[ExportToAnnotation]))
	case *networking.ServiceEntry:
		return ParseExportTo(spec.GetExportTo())
	case *networking.VirtualService:
		return ParseExportTo(spec.GetExportTo())
	case *networking.DestinationRule:
		return ParseExportTo(spec.GetExportTo())
	}
	return ExportTo{}
}

// ExportedTo says whether resource r (a Service, ServiceEntry, VirtualService
// or DestinationRule) is visible in namespace ns, with Istio's default of "*"
// when it declares nothing.
func ExportedTo(r *config.Resource, ns string) bool {
	if r == nil {
		return false
	}
	return ResourceExportTo(r).Allows(r.Meta.Namespace, ns)
}

// hostSubsetOf says whether every name host h matches is matched by pattern o:
// Istio's rule for importing service hosts. A wildcard service host
// (*.example.com) is imported only by an equal or wider wildcard (*.com, *),
// never by one of its exact names.
func hostSubsetOf(h, o string) bool {
	hw, ow := isWildcard(h), isWildcard(o)
	switch {
	case hw && ow:
		return len(h) >= len(o) && strings.HasSuffix(h[1:], o[1:])
	case hw:
		return false
	case ow:
		return strings.HasSuffix(h, o[1:])
	}
	return h == o
}

// hostMatches says whether two host patterns share any name; Istio uses this
// two-way rule for VirtualService hosts against egress hosts, so a route for
// *.example.com is imported by an egress host foo.example.com.
func hostMatches(a, b string) bool {
	aw, bw := isWildcard(a), isWildcard(b)
	switch {
	case aw && bw:
		if len(a) < len(b) {
			return strings.HasSuffix(b[1:], a[1:])
		}
		return strings.HasSuffix(a[1:], b[1:])
	case aw:
		return strings.HasSuffix(b, a[1:])
	case bw:
		return strings.HasSuffix(a, b[1:])
	}
	return a == b
}

func isWildcard(h string) bool { return h != "" && h[0] == '*' }

// resolveHost turns a short name in a VirtualService or DestinationRule
// (reviews) into the FQDN Istio reads it as (reviews.NS.svc.SUFFIX); names
// with a dot and wildcards are kept.
func resolveHost(h, ns, domainSuffix string) string {
	if h == "" || strings.Contains(h, ".") || isWildcard(h) {
		return h
	}
	return h + "." + ns + ".svc." + domainSuffix
}

// labelsSubset says whether every selector label is in labels; Istio's
// workload selector rule, under which an empty selector selects all.
func labelsSubset(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
