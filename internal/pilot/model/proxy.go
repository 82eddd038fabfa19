package model

import (
	"fmt"
	"strings"
)

// ProxyType is the kind of Envoy node, the first field of an Istio node id.
type ProxyType string

// Istio's proxy types.
const (
	Sidecar ProxyType = "sidecar"
	Router  ProxyType = "router" // a gateway
	// Ztunnel is a node proxy of the ambient mode (ztunnel, or meshperf-proxy
	// with --proxy-type ztunnel): it serves the pods of its node and is not a
	// workload itself, so it is never registered as one.
	Ztunnel ProxyType = "ztunnel"
	// Waypoint is an ambient mode's L7 proxy, an Envoy deployed for a
	// waypoint Gateway.
	Waypoint ProxyType = "waypoint"
)

// Proxy is a connected data-plane node, as its xDS node id and metadata describe
// it.
type Proxy struct {
	ID             string // the whole node id
	Type           ProxyType
	IPAddresses    []string // INSTANCE_IPS, else the id's IP
	PodName        string   // POD from POD.NS in the id
	Namespace      string   // NAMESPACE, else NS from the id
	DNSDomain      string   // the id's last field, e.g. ns.svc.cluster.local
	Labels         map[string]string
	ServiceAccount string
	WorkloadName   string
	IstioVersion   string // ISTIO_VERSION, for the pilot_xds gauge's version label
	// Authenticated is set once the control plane has verified the
	// stream's credential and found it names this proxy's namespace and
	// service account: only then is the identity more than a claim.
	Authenticated bool
}

// ParseNodeID reads an Istio node id, TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN,
// into a Proxy; metadata fills the rest later.
func ParseNodeID(id string) (*Proxy, error) {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return nil, fmt.Errorf("node id %q: want TYPE~IP~POD.NAMESPACE~DOMAIN", id)
	}
	p := &Proxy{ID: id, Type: ProxyType(parts[0]), DNSDomain: parts[3]}
	switch p.Type {
	case Sidecar, Router, Ztunnel, Waypoint:
	default:
		return nil, fmt.Errorf("node id %q: type %q is not one of sidecar, router, ztunnel, waypoint", id, parts[0])
	}
	if parts[1] != "" {
		p.IPAddresses = []string{parts[1]}
	}
	pod, ns, ok := strings.Cut(parts[2], ".")
	if !ok || pod == "" || ns == "" {
		return nil, fmt.Errorf("node id %q: want POD.NAMESPACE in the third field", id)
	}
	p.PodName, p.Namespace = pod, ns
	return p, nil
}
