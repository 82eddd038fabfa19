package kube

import (
	"cmp"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

// The EndpointSlice indexes: which slices name a pod, which a node, so that
// a pod's or node's change rebuilds only the slices it appears in.
const (
	indexPod  = "pod"
	indexNode = "node"
)

var sliceIndexers = cache.Indexers{
	indexPod: sliceIndex(func(s *discoveryv1.EndpointSlice, e *discoveryv1.Endpoint) string {
		if ref := e.TargetRef; ref != nil && ref.Kind == "Pod" {
			return podKey(cmp.Or(ref.Namespace, s.Namespace), ref.Name)
		}
		return ""
	}),
	indexNode: sliceIndex(func(_ *discoveryv1.EndpointSlice, e *discoveryv1.Endpoint) string {
		if e.NodeName != nil {
			return *e.NodeName
		}
		return ""
	}),
}

// sliceIndex indexes a slice by what key says of each endpoint ("" for
// nothing).
func sliceIndex(key func(*discoveryv1.EndpointSlice, *discoveryv1.Endpoint) string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		var out []string
		for i := range s.Endpoints {
			if k := key(s, &s.Endpoints[i]); k != "" {
				out = append(out, k)
			}
		}
		return out, nil
	}
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// Node labels that give a locality, as istiod reads them.
const (
	labelRegion = "topology.kubernetes.io/region"
	labelZone   = "topology.kubernetes.io/zone"
)

func (w *watch) sliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.sliceChanged(obj, "add") },
		UpdateFunc: func(_, obj any) { w.sliceChanged(obj, "update") },
		DeleteFunc: func(obj any) { w.sliceChanged(obj, "delete") },
	}
}

func (w *watch) sliceChanged(obj any, event string) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	w.src.metrics.registryEvent("EndpointSlice", event)
	key, err := cache.MetaNamespaceKeyFunc(s)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refreshSlice(key, s)
}

// refreshSlice sends the sink the slice's endpoints as the informers hold
// them now; gone is the last version seen, for a slice the informer no
// longer has. Called with mu held.
func (w *watch) refreshSlice(key string, gone *discoveryv1.EndpointSlice) {
	obj, exists, err := w.slices.GetIndexer().GetByKey(key)
	if err != nil {
		return
	}
	if !exists {
		if svc, ok := serviceOf(gone); ok {
			w.sink.DeleteEndpointSlice(svc, gone.Name)
		}
		return
	}
	s := obj.(*discoveryv1.EndpointSlice)
	svc, ok := serviceOf(s)
	if !ok {
		return
	}
	w.sink.SetEndpointSlice(svc, s.Name, w.endpoints(s))
}

// serviceOf is the Service a slice belongs to, by the label the
// EndpointSlice controller sets; slices without it (managed by something
// else for no Service) are not a Service's endpoints.
func serviceOf(s *discoveryv1.EndpointSlice) (config.Key, bool) {
	if s == nil {
		return config.Key{}, false
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return config.Key{}, false
	}
	return config.Key{Kind: config.KindService, Namespace: s.Namespace, Name: name}, true
}

// endpoints converts a slice, each address enriched from its Pod (labels,
// service account) and the Pod's Node (locality).
func (w *watch) endpoints(s *discoveryv1.EndpointSlice) []registry.SliceEndpoint {
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		return nil // FQDN slices name hosts, not workloads; istiod skips them too
	}
	ports := make(map[string]uint32, len(s.Ports))
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		ports[name] = uint32(*p.Port)
	}
	out := make([]registry.SliceEndpoint, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		base := registry.SliceEndpoint{
			// A nil ready condition means ready, as the API documents it.
			Ready:     e.Conditions.Ready == nil || *e.Conditions.Ready,
			Ports:     ports,
			Namespace: s.Namespace,
		}
		nodeName := ""
		if e.NodeName != nil {
			nodeName = *e.NodeName
		}
		pod, expected := w.pod(s.Namespace, e.TargetRef)
		if pod == nil && expected {
			// A Pod not seen yet (or already deleted): without it there is no
			// service account for the client's SAN check and no tlsMode,
			// so the endpoint waits for the Pod (whose add rebuilds this
			// slice through the pod index), as istiod makes it wait.
			continue
		}
		if pod != nil {
			base.Labels, base.ServiceAccount, base.WorkloadName = pod.Labels, pod.Spec.ServiceAccountName, pod.Name
			base.Namespace = pod.Namespace
			nodeName = cmp.Or(nodeName, pod.Spec.NodeName)
		}
		base.Locality = w.locality(nodeName)
		for _, addr := range e.Addresses {
			ep := base
			ep.Address = addr
			out = append(out, ep)
		}
	}
	return out
}

// pod is the endpoint's target Pod from the informer's cache; expected
// says the endpoint names a Pod at all (not another kind, or nothing).
func (w *watch) pod(namespace string, ref *corev1.ObjectReference) (pod *corev1.Pod, expected bool) {
	if ref == nil || ref.Kind != "Pod" {
		return nil, false
	}
	obj, ok, err := w.pods.GetIndexer().GetByKey(podKey(cmp.Or(ref.Namespace, namespace), ref.Name))
	if err != nil || !ok {
		return nil, true
	}
	pod, _ = obj.(*corev1.Pod)
	return pod, true
}

// locality is the node's "region/zone", "" when it has neither label.
func (w *watch) locality(nodeName string) string {
	if nodeName == "" {
		return ""
	}
	obj, ok, err := w.nodes.GetIndexer().GetByKey(nodeName)
	if err != nil || !ok {
		return ""
	}
	node, _ := obj.(*corev1.Node)
	if node == nil {
		return ""
	}
	region, zone := node.Labels[labelRegion], node.Labels[labelZone]
	if region == "" && zone == "" {
		return ""
	}
	return region + "/" + zone
}

func (w *watch) podHandler() cache.ResourceEventHandler {
	return w.rebuildOn("Pod", indexPod, func(o metav1.Object) string { return podKey(o.GetNamespace(), o.GetName()) })
}

func (w *watch) nodeHandler() cache.ResourceEventHandler {
	return w.rebuildOn("Node", indexNode, metav1.Object.GetName)
}

// rebuildOn rebuilds, on every change of an object, the slices that name
// it in the index. An informer replays its list as adds; before the slice
// handler is registered there is nothing to rebuild.
func (w *watch) rebuildOn(kind, index string, indexKey func(metav1.Object) string) cache.ResourceEventHandler {
	changed := func(obj any, event string) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		w.src.metrics.registryEvent(kind, event)
		objs, err := w.slices.GetIndexer().ByIndex(index, indexKey(o))
		if err != nil || len(objs) == 0 {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, obj := range objs {
			s := obj.(*discoveryv1.EndpointSlice)
			if key, err := cache.MetaNamespaceKeyFunc(s); err == nil {
				w.refreshSlice(key, s)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(obj, "add") },
		UpdateFunc: func(old, obj any) {
			if enrichmentSame(old, obj) {
				return // status churn: nothing the endpoints carry changed
			}
			changed(obj, "update")
		},
		DeleteFunc: func(obj any) { changed(obj, "delete") },
	}
}

// enrichmentSame says whether a Pod or Node update leaves what endpoints
// take from it alone. Pods' status changes with every probe; without this
// each would rebuild its slices for nothing.
func enrichmentSame(old, cur any) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		c, ok := cur.(*corev1.Pod)
		return ok && maps.Equal(o.Labels, c.Labels) && o.Spec.ServiceAccountName == c.Spec.ServiceAccountName &&
			o.Spec.NodeName == c.Spec.NodeName
	case *corev1.Node:
		c, ok := cur.(*corev1.Node)
		return ok && o.Labels[labelRegion] == c.Labels[labelRegion] && o.Labels[labelZone] == c.Labels[labelZone]
	}
	return false
}
