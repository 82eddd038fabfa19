package kube

import (
	"errors"

	istiov1net "istio.io/client-go/pkg/apis/networking/v1"
	istiov1sec "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/store"
)

// configKind is one kind the pilot reads into the store: how an informer's
// object becomes a Resource.
type configKind struct {
	kind       config.Kind
	apiVersion string
	informer   cache.SharedIndexInformer
	convert    func(obj any) (*config.Resource, bool)
}

// kindOf builds a configKind for objects of type T whose spec is spec(T);
// an object whose spec is nil is not config yet, and is left out.
func kindOf[T metav1.Object](kind config.Kind, apiVersion string, inf cache.SharedIndexInformer, spec func(T) any) configKind {
	return configKind{kind: kind, apiVersion: apiVersion, informer: inf, convert: func(obj any) (*config.Resource, bool) {
		o, ok := obj.(T)
		if !ok {
			return nil, false
		}
		sp := spec(o)
		if sp == nil {
			return nil, false
		}
		return &config.Resource{Kind: kind, APIVersion: apiVersion, Meta: meta(kind, o), Spec: sp}, true
	}}
}

// waypointSpec is a Gateway's spec with the address it was given: on
// Kubernetes a waypoint's address is the one its deployment reported in
// the Gateway's status (its Service's cluster IP), which is where Istio
// reads it too. Until it has one the Gateway is not a waypoint yet (nil);
// a Gateway whose spec names its address keeps it.
func waypointSpec(gw *gatewayv1.Gateway) any {
	if len(gw.Spec.Addresses) > 0 {
		return &gw.Spec
	}
	spec := gw.Spec
	for _, a := range gw.Status.Addresses {
		if a.Type == nil || *a.Type == gatewayv1.IPAddressType {
			spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: a.Type, Value: a.Value}}
			return &spec
		}
	}
	return nil
}

// meta keeps what the control plane reads of an object's metadata. The
// rest (managed fields, owner references, the last-applied annotation's
// copy of the object is kept with the annotations) would be held twice, in
// the informer's cache and in the store, for nothing.
func meta(kind config.Kind, o metav1.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: o.GetName(), Labels: o.GetLabels(), Annotations: o.GetAnnotations()}
	if !kind.ClusterScoped() {
		m.Namespace = o.GetNamespace()
	}
	return m
}

// configKinds are every kind the pilot reads, from the watch's factories.
func (w *watch) configKinds() []configKind {
	core := w.coreFactory.Core().V1()
	net := w.istioFactory.Networking().V1()
	sec := w.istioFactory.Security().V1()
	const netV1, secV1 = "networking.istio.io/v1", "security.istio.io/v1"
	kinds := []configKind{
		kindOf(config.KindNamespace, "v1", core.Namespaces().Informer(), func(o *corev1.Namespace) any { return &o.Spec }),
		kindOf(config.KindService, "v1", core.Services().Informer(), func(o *corev1.Service) any { return &o.Spec }),
		kindOf(config.KindServiceEntry, netV1, net.ServiceEntries().Informer(), func(o *istiov1net.ServiceEntry) any { return &o.Spec }),
		kindOf(config.KindWorkloadEntry, netV1, net.WorkloadEntries().Informer(), func(o *istiov1net.WorkloadEntry) any { return &o.Spec }),
		kindOf(config.KindVirtualService, netV1, net.VirtualServices().Informer(), func(o *istiov1net.VirtualService) any { return &o.Spec }),
		kindOf(config.KindDestinationRule, netV1, net.DestinationRules().Informer(), func(o *istiov1net.DestinationRule) any { return &o.Spec }),
		kindOf(config.KindGateway, netV1, net.Gateways().Informer(), func(o *istiov1net.Gateway) any { return &o.Spec }),
		kindOf(config.KindSidecar, netV1, net.Sidecars().Informer(), func(o *istiov1net.Sidecar) any { return &o.Spec }),
		kindOf(config.KindPeerAuthentication, secV1, sec.PeerAuthentications().Informer(), func(o *istiov1sec.PeerAuthentication) any { return &o.Spec }),
		kindOf(config.KindAuthorizationPolicy, secV1, sec.AuthorizationPolicies().Informer(), func(o *istiov1sec.AuthorizationPolicy) any { return &o.Spec }),
	}
	if w.gwFactory != nil {
		kinds = append(kinds, kindOf(config.KindKubernetesGateway, config.GatewayAPIGroup+"/v1",
			w.gwFactory.Gateway().V1().Gateways().Informer(), waypointSpec))
	}
	return kinds
}

// configHandler feeds one kind's informer events into the store. An object
// that does not validate is logged and counted, and its last good version
// stays, as --configDir keeps a rejected file's.
func (w *watch) configHandler(k configKind) cache.ResourceEventHandler {
	put := func(obj any, event string) {
		r, ok := k.convert(obj)
		if !ok {
			return
		}
		w.src.metrics.configEvent(k.kind, event)
		if err := w.src.feed.Put(r); err != nil {
			w.src.metrics.rejected(k.kind)
			if errors.Is(err, store.ErrInvalid) {
				w.src.log.Warn("Kubernetes object rejected, keeping its last valid version", "object", r.Key().String(), "error", err)
				return
			}
			w.src.log.Error("Kubernetes object not stored", "object", r.Key().String(), "error", err)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { put(obj, "add") },
		UpdateFunc: func(_, obj any) { put(obj, "update") },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			o, ok := obj.(metav1.Object)
			if !ok {
				return
			}
			w.src.metrics.configEvent(k.kind, "delete")
			key := config.Key{Kind: k.kind, Namespace: o.GetNamespace(), Name: o.GetName()}
			if k.kind.ClusterScoped() {
				key.Namespace = ""
			}
			w.src.feed.Remove(key)
		},
	}
}
