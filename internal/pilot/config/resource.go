// Package config is the control plane's view of Istio configuration: the kinds it
// reads, one Resource per object, decoding of multi-document YAML into Istio's and
// Kubernetes' published Go types, validation, and the mesh config.
//
// Every other part of pilot (store, registry, scope, push, generate) speaks in
// Resources and Keys from here.
package config

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is a configuration kind, by its Kubernetes kind name, qualified by its
// API group (kubectl's KIND.GROUP) where two groups share the name.
type Kind string

// The kinds the control plane reads.
const (
	KindNamespace          Kind = "Namespace"
	KindService            Kind = "Service"
	KindServiceEntry       Kind = "ServiceEntry"
	KindWorkloadEntry      Kind = "WorkloadEntry"
	KindVirtualService     Kind = "VirtualService"
	KindDestinationRule    Kind = "DestinationRule"
	KindGateway            Kind = "Gateway"
	KindSidecar            Kind = "Sidecar"
	KindPeerAuthentication Kind = "PeerAuthentication"
	// KindAuthorizationPolicy is enforced by node proxies (WDS) in the
	// ambient mode; sidecars do not enforce it yet.
	KindAuthorizationPolicy Kind = "AuthorizationPolicy"
	// KindKubernetesGateway is the Gateway API's Gateway
	// (gateway.networking.k8s.io), which declares a waypoint; Istio's
	// networking Gateway of the same name is KindGateway.
	KindKubernetesGateway Kind = "Gateway." + GatewayAPIGroup
)

// GatewayAPIGroup is the Kubernetes Gateway API's group.
const GatewayAPIGroup = "gateway.networking.k8s.io"

// Kinds lists the supported kinds, in the order errors name them.
var Kinds = []Kind{
	KindNamespace, KindService, KindServiceEntry, KindWorkloadEntry, KindVirtualService,
	KindDestinationRule, KindGateway, KindSidecar, KindPeerAuthentication, KindAuthorizationPolicy,
	KindKubernetesGateway,
}

// ClusterScoped says whether objects of the kind have no namespace.
func (k Kind) ClusterScoped() bool { return k == KindNamespace }

// ManifestKind is the kind as manifests write it ("Gateway" for both
// Gateways: their apiVersion tells them apart).
func (k Kind) ManifestKind() string {
	name, _, _ := strings.Cut(string(k), ".")
	return name
}

// Group is the kind's API group, "" for the core kinds.
func (k Kind) Group() string {
	switch k {
	case KindNamespace, KindService:
		return ""
	case KindPeerAuthentication, KindAuthorizationPolicy:
		return "security.istio.io"
	case KindKubernetesGateway:
		return GatewayAPIGroup
	}
	return "networking.istio.io"
}

// KindOf resolves a manifest's kind by its apiVersion: "Gateway" is Istio's
// networking Gateway unless its apiVersion is the Gateway API's. Other names
// are returned as they are (supported or not).
func KindOf(apiVersion, kind string) Kind {
	if group, _, _ := strings.Cut(apiVersion, "/"); kind == KindKubernetesGateway.ManifestKind() && group == GatewayAPIGroup {
		return KindKubernetesGateway
	}
	return Kind(kind)
}

// Key identifies one object. Namespace is empty for cluster-scoped kinds.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return string(k.Kind) + "/" + k.Name
	}
	return string(k.Kind) + "/" + k.Namespace + "/" + k.Name
}

// Resource is one configuration object: its kind, its metadata and its typed
// spec.
//
// Spec holds the published type of the kind, as a pointer:
//   - Istio kinds: the istio.io/api message, e.g. *networking.VirtualService
//     (istio.io/api/networking/v1alpha3; the v1 and v1beta1 packages alias it),
//     *security.PeerAuthentication, *security.AuthorizationPolicy
//     (istio.io/api/security/v1beta1);
//   - Service: *corev1.ServiceSpec; Namespace: *corev1.NamespaceSpec
//     (k8s.io/api/core/v1). A namespace's labels are in Meta.Labels.
//   - the Gateway API's Gateway: *gatewayv1.GatewaySpec
//     (sigs.k8s.io/gateway-api/apis/v1).
type Resource struct {
	Kind       Kind
	APIVersion string            // as written, e.g. "networking.istio.io/v1"
	Meta       metav1.ObjectMeta // name, namespace, labels, annotations, resourceVersion, creationTimestamp
	Spec       any
}

// Key returns the resource's identity.
func (r *Resource) Key() Key {
	return Key{Kind: r.Kind, Namespace: r.Meta.Namespace, Name: r.Meta.Name}
}
