package generate

import (
	"cmp"
	"net/netip"
	"strings"

	"istio.io/istio/pkg/workloadapi"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// The ambient mode's labels, Istio's names.
const (
	// DataplaneModeLabel enrols a namespace or a workload in the ambient mode
	// with the value AmbientMode.
	DataplaneModeLabel = "istio.io/dataplane-mode"
	AmbientMode        = "ambient"
	// NodeLabel names the node (a lab node namespace) a WorkloadEntry runs
	// on; a pod's spec.nodeName in istiod. Istio has no label for it, since
	// its pods carry the field.
	NodeLabel = "topology.istio.io/node"
)

// HBONEPort is where node proxies and waypoints accept HBONE (ztunnel's and
// istiod's 15008).
const HBONEPort = 15008

// KubernetesCluster is istiod's default cluster id, the first field of its
// workload uids.
const KubernetesCluster = "Kubernetes"

// WorkloadUID is a workload's WDS resource name, istiod's uid of a pod:
// Kubernetes//Pod/NS/NAME. WorkloadEntries get it too (istiod names them
// .../networking.istio.io/WorkloadEntry/...), because off Kubernetes each
// WorkloadEntry stands for a pod, and the uid must be the one the lab sends
// the node proxy over ZDS when the pod starts.
func WorkloadUID(namespace, name string) string {
	return KubernetesCluster + "//Pod/" + namespace + "/" + name
}

// ServiceResourceName is a service's WDS resource name: NS/HOSTNAME.
func ServiceResourceName(namespace, hostname string) string { return namespace + "/" + hostname }

// canonical label names, most specific first, as istiod reads them.
var (
	canonicalNameLabels     = []string{"service.istio.io/canonical-name", "app.kubernetes.io/name", "app"}
	canonicalRevisionLabels = []string{"service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"}
)

func firstLabel(labels map[string]string, keys []string, fallback string) string {
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			return v
		}
	}
	return fallback
}

// WorkloadInput is what a WDS Workload is made of besides the registry's
// workload: what the mesh, its policies and waypoints say about it.
type WorkloadInput struct {
	Workload    *model.Workload
	TrustDomain string
	// Ambient says the workload is enrolled (its namespace or itself has
	// istio.io/dataplane-mode: ambient): node proxies then reach it over HBONE.
	Ambient bool
	// Policies are the WDS names of the authorization policies that select
	// it (workload-scoped ones; namespace and global ones apply by scope).
	Policies []string
	// Waypoint is where its traffic goes first; nil when it has none.
	Waypoint *workloadapi.GatewayAddress
}

// AmbientWorkload is a workload as the node proxies see it.
func AmbientWorkload(in WorkloadInput) *workloadapi.Workload {
	w := in.Workload
	out := &workloadapi.Workload{
		Uid:                   WorkloadUID(w.Namespace, w.Name),
		Name:                  w.Name,
		Namespace:             w.Namespace,
		ServiceAccount:        w.ServiceAccount,
		TrustDomain:           in.TrustDomain,
		Node:                  cmp.Or(w.Node, w.Labels[NodeLabel]),
		WorkloadName:          cmp.Or(w.WorkloadName, w.Name),
		WorkloadType:          workloadapi.WorkloadType_POD,
		CanonicalName:         firstLabel(w.Labels, canonicalNameLabels, w.Name),
		CanonicalRevision:     firstLabel(w.Labels, canonicalRevisionLabels, "latest"),
		Status:                workloadapi.WorkloadStatus_HEALTHY,
		ClusterId:             KubernetesCluster,
		AuthorizationPolicies: in.Policies,
		Waypoint:              in.Waypoint,
	}
	if out.ServiceAccount == "" {
		out.ServiceAccount = "default" // a pod's, when its spec names none
	}
	if addr, err := netip.ParseAddr(w.Address); err == nil {
		out.Addresses = [][]byte{addr.AsSlice()}
	} else {
		out.Hostname = w.Address // a WorkloadEntry may name a host
	}
	if w.NotReady {
		out.Status = workloadapi.WorkloadStatus_UNHEALTHY
	}
	if in.Ambient {
		out.TunnelProtocol = workloadapi.TunnelProtocol_HBONE
	}
	if len(w.Services) > 0 {
		out.Services = make(map[string]*workloadapi.PortList, len(w.Services))
		for _, ws := range w.Services {
			pl := &workloadapi.PortList{}
			for _, p := range ws.Ports {
				pl.Ports = append(pl.Ports, &workloadapi.Port{ServicePort: p.ServicePort, TargetPort: p.TargetPort})
			}
			out.Services[ServiceResourceName(ws.Service.Namespace, ws.Service.Hostname)] = pl
		}
	}
	return out
}

// AmbientService is a service as the node proxies see it: its VIPs and
// ports, and its waypoint (nil: none).
func AmbientService(svc *model.Service, waypoint *workloadapi.GatewayAddress) *workloadapi.Service {
	out := &workloadapi.Service{
		Name:      serviceName(svc),
		Namespace: svc.Namespace,
		Hostname:  svc.Hostname,
		Waypoint:  waypoint,

		SubjectAltNames: svc.SubjectAltNames,
	}
	for _, a := range svc.Addresses {
		if addr, err := netip.ParseAddr(a); err == nil {
			out.Addresses = append(out.Addresses, &workloadapi.NetworkAddress{Address: addr.AsSlice()})
		}
	}
	for _, p := range svc.Ports {
		target := p.TargetPort
		if target == 0 {
			target = p.Number
		}
		out.Ports = append(out.Ports, &workloadapi.Port{ServicePort: p.Number, TargetPort: target, AppProtocol: appProtocol(p.Protocol)})
	}
	return out
}

// serviceName is a Service's name (the hostname's first label) or, for a
// ServiceEntry host, the ServiceEntry's name, as istiod names them.
func serviceName(svc *model.Service) string {
	if svc.Key.Kind == "Service" {
		name, _, _ := strings.Cut(svc.Hostname, ".")
		return name
	}
	return svc.Key.Name
}

// appProtocol maps Istio's port protocols onto WDS's, which tell a node
// proxy or waypoint what it may parse; unknown stays UNKNOWN.
func appProtocol(p model.Protocol) workloadapi.AppProtocol {
	switch p {
	case "HTTP":
		return workloadapi.AppProtocol_HTTP11
	case "HTTP2":
		return workloadapi.AppProtocol_HTTP2
	case "GRPC":
		return workloadapi.AppProtocol_GRPC
	case "TCP":
		return workloadapi.AppProtocol_TCP
	case "TLS", "HTTPS":
		return workloadapi.AppProtocol_TLS
	}
	return workloadapi.AppProtocol_UNKNOWN
}

// WaypointAddress is a waypoint as workloads and services name it: its IP
// and HBONE port.
func WaypointAddress(ip string) *workloadapi.GatewayAddress {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	return &workloadapi.GatewayAddress{
		Destination:   &workloadapi.GatewayAddress_Address{Address: &workloadapi.NetworkAddress{Address: addr.AsSlice()}},
		HboneMtlsPort: HBONEPort,
	}
}
