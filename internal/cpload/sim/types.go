// Package sim simulates a fleet of Istio sidecars in one process: each
// simulated proxy opens its own ADS stream (state of the world or delta),
// subscribes the way Envoy does under istio-agent (CDS and LDS wildcard, then
// EDS for the clusters CDS named and RDS for the routes LDS named, SDS for the
// workload secrets), acknowledges or rejects every response, and records when
// each response arrived and how big it was. It keeps only resource names,
// never the resources, so that thousands of proxies fit in one process; the
// churn driver above it decides when a change has reached the proxies from
// those records and from Watch.
package sim

import "strings"

// Type is an xDS resource type a sidecar subscribes to.
type Type uint8

// The types, in the order istiod pushes them.
const (
	Cluster Type = iota
	Endpoint
	Listener
	Route
	Secret
	numTypes
)

// Types lists every Type.
var Types = []Type{Cluster, Endpoint, Listener, Route, Secret}

var typeURLs = [numTypes]string{
	"type.googleapis.com/envoy.config.cluster.v3.Cluster",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
	"type.googleapis.com/envoy.config.listener.v3.Listener",
	"type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
	"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
}

// shortNames are the values of istiod's metric label "type".
var shortNames = [numTypes]string{"cds", "eds", "lds", "rds", "sds"}

// URL is the type's xDS type URL.
func (t Type) URL() string {
	if t >= numTypes {
		return ""
	}
	return typeURLs[t]
}

// String is the short name istiod's metrics use: cds, eds, lds, rds, sds.
func (t Type) String() string {
	if t >= numTypes {
		return "unknown"
	}
	return shortNames[t]
}

// ParseType reads a short name (cds, eds, lds, rds, sds) or a type URL.
func ParseType(s string) (Type, bool) {
	for t := range numTypes {
		if strings.EqualFold(s, shortNames[t]) || s == typeURLs[t] {
			return t, true
		}
	}
	return 0, false
}

func typeOfURL(url string) (Type, bool) {
	for t := range numTypes {
		if url == typeURLs[t] {
			return t, true
		}
	}
	return 0, false
}
