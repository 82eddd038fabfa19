package config

import (
	"net/netip"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Waypoints, as Istio declares them: a Gateway API Gateway of class
// istio-waypoint, listening for HBONE on 15008, that workloads, services and
// namespaces opt into by label.
const (
	WaypointGatewayClass = "istio-waypoint"
	// WaypointListenerPort and WaypointListenerProtocol are the one listener
	// Istio writes on a waypoint Gateway (named "mesh").
	WaypointListenerPort     = 15008
	WaypointListenerProtocol = "HBONE"

	// WaypointForLabel on a waypoint Gateway says which traffic it takes:
	// to services (the default), to workloads, to both, or none.
	WaypointForLabel    = "istio.io/waypoint-for"
	WaypointForService  = "service"
	WaypointForWorkload = "workload"
	WaypointForAll      = "all"
	WaypointForNone     = "none"

	// UseWaypointLabel on a Namespace, Service, ServiceEntry or WorkloadEntry
	// names the waypoint its traffic goes through (the object's own label
	// wins over its namespace's; UseWaypointNone opts out).
	// UseWaypointNamespaceLabel names the waypoint's namespace when it is not
	// the object's.
	UseWaypointLabel          = "istio.io/use-waypoint"
	UseWaypointNamespaceLabel = "istio.io/use-waypoint-namespace"
	UseWaypointNone           = "none"

	// GatewayNameLabel is on a waypoint's pod (and its proxy's node
	// metadata): the Gateway it was deployed for, in its own namespace.
	GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
)

var waypointFor = []string{WaypointForService, WaypointForWorkload, WaypointForAll, WaypointForNone}

// WaypointFor is what a waypoint Gateway serves: its label, else service.
func WaypointFor(r *Resource) string {
	if v, ok := r.Meta.Labels[WaypointForLabel]; ok {
		return v
	}
	return WaypointForService
}

// WaypointAddress is a validated waypoint Gateway's IP: its one address.
func WaypointAddress(spec *gatewayv1.GatewaySpec) string {
	if len(spec.Addresses) != 1 {
		return ""
	}
	return spec.Addresses[0].Value
}

// validateWaypointGateway accepts the Gateway API Gateways Istio deploys as
// waypoints, and only those: meshperf has no other use for the kind. Off
// Kubernetes nothing assigns the waypoint's address, so the Gateway must
// carry it.
func validateWaypointGateway(r *Resource, errs *fieldErrors) bool {
	gw, ok := r.Spec.(*gatewayv1.GatewaySpec)
	if !ok {
		return false
	}
	if v, ok := r.Meta.Labels[WaypointForLabel]; ok && !slices.Contains(waypointFor, v) {
		errs.add(key("metadata.labels", WaypointForLabel), "%q is not one of %s", v, strings.Join(waypointFor, ", "))
	}
	if gw.GatewayClassName != WaypointGatewayClass {
		errs.add("spec.gatewayClassName", "%q is not supported; want %s (the only Gateway API class meshperf serves, waypoints)", gw.GatewayClassName, WaypointGatewayClass)
	}
	if len(gw.Listeners) == 0 {
		errs.add("spec.listeners", "required: a waypoint listens for %s on %d (name mesh, port %d, protocol %s)", WaypointListenerProtocol, WaypointListenerPort, WaypointListenerPort, WaypointListenerProtocol)
	}
	for i, l := range gw.Listeners {
		path := idx("spec.listeners", i)
		if l.Name == "" {
			errs.add(path+".name", "required")
		}
		if l.Protocol != WaypointListenerProtocol {
			errs.add(path+".protocol", "%q is not supported; a waypoint listens for %s only", l.Protocol, WaypointListenerProtocol)
		}
		if l.Port != WaypointListenerPort {
			errs.add(path+".port", "%d is not supported; a waypoint's %s listener is on %d", l.Port, WaypointListenerProtocol, WaypointListenerPort)
		}
	}
	validateWaypointAddresses(gw.Addresses, errs)
	return true
}

func validateWaypointAddresses(addrs []gatewayv1.GatewaySpecAddress, errs *fieldErrors) {
	switch {
	case len(addrs) == 0:
		errs.add("spec.addresses", "required off Kubernetes: the waypoint's IP address, as [{type: IPAddress, value: IP}]")
		return
	case len(addrs) > 1:
		errs.add("spec.addresses", "has %d addresses; want one, the waypoint's IP address", len(addrs))
		return
	}
	a := addrs[0]
	if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
		errs.add("spec.addresses[0].type", "%q is not supported; want %s", *a.Type, gatewayv1.IPAddressType)
	}
	if _, err := netip.ParseAddr(a.Value); err != nil {
		errs.add("spec.addresses[0].value", "%q is not an IP address", a.Value)
	}
}
