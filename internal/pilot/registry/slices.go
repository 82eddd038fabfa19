package registry

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// SliceEndpoint is one address of a Kubernetes EndpointSlice, with what its
// Pod and the Pod's Node say about it. On a cluster these are a Service's
// endpoints, as istiod takes them: the EndpointSlice controller has already
// applied the selector, readiness and the named target ports.
type SliceEndpoint struct {
	Address string
	Ready   bool
	// Ports are the slice's ports by name ("" for a Service's single
	// unnamed port), each the workload's port.
	Ports          map[string]uint32
	Labels         map[string]string // the Pod's
	ServiceAccount string
	Namespace      string
	WorkloadName   string // the Pod's name
	Locality       string // "region/zone" of the Pod's Node
}

func (a SliceEndpoint) equal(b SliceEndpoint) bool {
	return a.Address == b.Address && a.Ready == b.Ready && maps.Equal(a.Ports, b.Ports) &&
		maps.Equal(a.Labels, b.Labels) && a.ServiceAccount == b.ServiceAccount &&
		a.Namespace == b.Namespace && a.WorkloadName == b.WorkloadName && a.Locality == b.Locality
}

// SetEndpointSlice records one EndpointSlice's endpoints for the Service
// with the key (kind Service) and asks for an endpoint (EDS) push of that
// Service when they changed. eps nil or empty keeps the slice, empty.
func (r *Registry) SetEndpointSlice(service config.Key, slice string, eps []SliceEndpoint) {
	r.mu.Lock()
	bySlice := r.slices[service]
	if prev, ok := bySlice[slice]; ok && slices.EqualFunc(prev, eps, SliceEndpoint.equal) {
		r.mu.Unlock()
		return
	}
	if bySlice == nil {
		bySlice = map[string][]SliceEndpoint{}
		r.slices[service] = bySlice
	}
	bySlice[slice] = eps
	r.dirty[service.Namespace] = true
	typ, req := r.sliceChangeLocked(service)
	r.mu.Unlock()
	if req != nil {
		r.notify(typ, req)
	}
}

// DeleteEndpointSlice forgets one EndpointSlice of the Service.
func (r *Registry) DeleteEndpointSlice(service config.Key, slice string) {
	r.mu.Lock()
	bySlice := r.slices[service]
	if _, ok := bySlice[slice]; !ok {
		r.mu.Unlock()
		return
	}
	delete(bySlice, slice)
	if len(bySlice) == 0 {
		delete(r.slices, service)
	}
	r.dirty[service.Namespace] = true
	typ, req := r.sliceChangeLocked(service)
	r.mu.Unlock()
	if req != nil {
		r.notify(typ, req)
	}
}

// sliceChangeLocked is the push a slice change calls for: an EDS push of the
// Service, when it is visible (a slice may arrive before its Service; the
// Service's own push then carries the endpoints).
func (r *Registry) sliceChangeLocked(service config.Key) (InboundType, *model.PushRequest) {
	if _, ok := r.services[service]; !ok || !r.visibleLocked(service.Namespace) {
		return "", nil
	}
	return InboundEDS, model.NewPushRequest(model.ReasonEndpoint, false, r.opts.Now(), service)
}

// fromSlices reports whether a service's endpoints come from EndpointSlices
// rather than from the workloads its selector picks: Kubernetes Services,
// when the registry is fed from a cluster.
func (r *Registry) fromSlices(res *config.Resource) bool {
	_, kube := res.Spec.(*corev1.ServiceSpec)
	return kube && r.opts.EndpointSlices
}

// sliceEndpoints are the endpoints of a Service's slices for each of its
// ports: ready addresses (every address when the Service publishes
// not-ready ones), each port matched by name as kube-proxy matches it, an
// address in two slices (while one is being replaced) counted once.
func sliceEndpoints(svc *model.Service, res *config.Resource, bySlice map[string][]SliceEndpoint) []*model.Endpoint {
	publishNotReady := res.Spec.(*corev1.ServiceSpec).PublishNotReadyAddresses
	type seenKey struct {
		address string
		port    uint32
	}
	seen := map[seenKey]bool{}
	var out []*model.Endpoint
	for _, name := range slices.Sorted(maps.Keys(bySlice)) {
		for _, e := range bySlice[name] {
			if !e.Ready && !publishNotReady {
				continue
			}
			for _, p := range svc.Ports {
				target, ok := e.Ports[p.Name]
				if !ok || seen[seenKey{e.Address, p.Number}] {
					continue
				}
				seen[seenKey{e.Address, p.Number}] = true
				out = append(out, &model.Endpoint{
					Address: e.Address, Port: target, ServicePort: p.Number, Labels: e.Labels,
					ServiceAccount: e.ServiceAccount, Namespace: e.Namespace, WorkloadName: e.WorkloadName,
					TLSMode: e.Labels[tlsModeLabel], Locality: e.Locality,
				})
			}
		}
	}
	return out
}
