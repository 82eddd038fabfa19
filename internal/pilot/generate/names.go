// Package generate turns the control plane's model of the mesh into Envoy v3
// resources for one proxy (or one Sidecar scope shared by many): clusters (CDS),
// endpoints (EDS), listeners (LDS), routes (RDS). It uses Istio's resource names
// and structure, so a config dump reads like istiod's and operators' habits carry
// over; it generates only what meshperf-proxy and Envoy need for the features the
// configuration kinds ask for.
package generate

import (
	"slices"
	"strconv"
	"strings"
)

// Traffic directions, the first field of an Istio cluster name.
const (
	outbound = "outbound"
	inbound  = "inbound"
)

// Istio's special clusters and listeners.
const (
	BlackHoleCluster          = "BlackHoleCluster"
	PassthroughCluster        = "PassthroughCluster"
	InboundPassthroughCluster = "InboundPassthroughCluster"
	VirtualOutboundListener   = "virtualOutbound"
	VirtualInboundListener    = "virtualInbound"
	VirtualOutboundPort       = 15001
	VirtualInboundPort        = 15006
)

// ClusterName is Istio's cluster name, DIRECTION|PORT|SUBSET|HOST, e.g.
// outbound|9080|v1|reviews.default.svc.cluster.local or inbound|9080||.
func ClusterName(direction string, port uint32, subset, host string) string {
	return direction + "|" + strconv.FormatUint(uint64(port), 10) + "|" + subset + "|" + host
}

// ParseClusterName splits an Istio cluster name; ok is false for other names.
func ParseClusterName(name string) (direction string, port uint32, subset, host string, ok bool) {
	// Cut rather than Split: every proxy's EDS request names every cluster
	// it has, and a push parses them all, so the parts' slice was an
	// allocation per name per proxy.
	direction, rest, ok1 := strings.Cut(name, "|")
	portText, rest, ok2 := strings.Cut(rest, "|")
	subset, host, ok3 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || !ok3 {
		return "", 0, "", "", false
	}
	p, err := strconv.ParseUint(portText, 10, 32)
	if err != nil {
		return "", 0, "", "", false
	}
	return direction, uint32(p), subset, host, true
}

// outboundSNI is the SNI Istio sets on mTLS connections to a cluster, which the
// server side uses to pick its filter chain: outbound_.PORT_.SUBSET_.HOST.
func outboundSNI(port uint32, subset, host string) string {
	return "outbound_." + strconv.FormatUint(uint64(port), 10) + "_." + subset + "_." + host
}

// sortStrings sorts in place; generated config must not depend on map order.
func sortStrings(s []string) { slices.Sort(s) }
