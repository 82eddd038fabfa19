package sim

import (
	"unique"

	"google.golang.org/protobuf/encoding/protowire"
)

// The names a proxy needs are read straight from the wire format: a full
// decode of every Cluster and Listener would cost thousands of proxies far more
// CPU and garbage than the few fields they look at. Field numbers are those of
// the Envoy v3 messages; names_test.go checks them against the generated
// types.
const (
	fieldName = 1 // Cluster.name, Listener.name, RouteConfiguration.name,
	// ClusterLoadAssignment.cluster_name, Secret.name, VirtualHost.name

	fieldClusterType      = 2 // Cluster.type
	fieldClusterEDSConfig = 3 // Cluster.eds_cluster_config
	fieldEDSServiceName   = 2 // EdsClusterConfig.service_name
	clusterTypeEDS        = 3 // Cluster.DiscoveryType EDS

	fieldListenerFilterChains = 3  // Listener.filter_chains
	fieldListenerDefaultChain = 25 // Listener.default_filter_chain
	fieldChainFilters         = 3  // FilterChain.filters
	fieldFilterTypedConfig    = 4  // Filter.typed_config
	fieldAnyTypeURL           = 1  // Any.type_url
	fieldAnyValue             = 2  // Any.value
	fieldHCMRds               = 3  // HttpConnectionManager.rds
	fieldRdsRouteConfigName   = 2  // Rds.route_config_name

	fieldRouteVirtualHosts = 2 // RouteConfiguration.virtual_hosts

	hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)

// eachField calls fn for every field of an encoded message, stopping early if fn
// returns false. A malformed message ends the walk: a load client reports what
// it could read rather than failing the proxy.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return
		}
		b = b[n:]
		if !fn(num, typ, v, u) {
			return
		}
	}
}

// bytesField returns the first length-delimited field num of b.
func bytesField(b []byte, num protowire.Number) ([]byte, bool) {
	var out []byte
	found := false
	eachField(b, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) bool {
		if n == num && t == protowire.BytesType {
			out, found = v, true
			return false
		}
		return true
	})
	return out, found
}

// resourceName reads field 1, which is the name of every type a sidecar
// subscribes to.
func resourceName(b []byte) string {
	v, _ := bytesField(b, fieldName)
	return string(v)
}

// clusterEDSName returns the name to ask EDS for if the encoded Cluster is an
// EDS cluster: its eds_cluster_config.service_name, or else its own name.
func clusterEDSName(b []byte) (name, eds string, isEDS bool) {
	eachField(b, func(n protowire.Number, t protowire.Type, v []byte, u uint64) bool {
		switch {
		case n == fieldName && t == protowire.BytesType:
			name = string(v)
		case n == fieldClusterType && t == protowire.VarintType:
			isEDS = u == clusterTypeEDS
		case n == fieldClusterEDSConfig && t == protowire.BytesType:
			if s, ok := bytesField(v, fieldEDSServiceName); ok {
				eds = string(s)
			}
		}
		return true
	})
	if eds == "" {
		eds = name
	}
	return name, eds, isEDS
}

// listenerRouteNames returns the listener's name and the RDS route
// configurations its HTTP connection managers name (inline routes need no
// RDS).
func listenerRouteNames(b []byte) (name string, routes []string) {
	chain := func(fc []byte) {
		eachField(fc, func(n protowire.Number, t protowire.Type, filter []byte, _ uint64) bool {
			if n != fieldChainFilters || t != protowire.BytesType {
				return true
			}
			anyMsg, ok := bytesField(filter, fieldFilterTypedConfig)
			if !ok {
				return true
			}
			if url, _ := bytesField(anyMsg, fieldAnyTypeURL); string(url) != hcmTypeURL {
				return true
			}
			hcm, _ := bytesField(anyMsg, fieldAnyValue)
			if rds, ok := bytesField(hcm, fieldHCMRds); ok {
				if rn, ok := bytesField(rds, fieldRdsRouteConfigName); ok && len(rn) > 0 {
					routes = append(routes, string(rn))
				}
			}
			return true
		})
	}
	eachField(b, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) bool {
		switch {
		case n == fieldName && t == protowire.BytesType:
			name = string(v)
		case (n == fieldListenerFilterChains || n == fieldListenerDefaultChain) && t == protowire.BytesType:
			chain(v)
		}
		return true
	})
	return name, routes
}

// virtualHostNames calls fn with the name of every virtual host of an encoded
// RouteConfiguration (Istio names them HOST:PORT), so that a Watch can see a
// VirtualService's host arrive inside a route configuration whose own name
// (the port) never changes.
func virtualHostNames(b []byte, fn func(string)) {
	eachField(b, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) bool {
		if n == fieldRouteVirtualHosts && t == protowire.BytesType {
			if name, ok := bytesField(v, fieldName); ok {
				fn(string(name))
			}
		}
		return true
	})
}

// intern returns the one copy of a name shared by all proxies: thousands of
// proxies subscribe to largely the same cluster and route names.
func intern(s string) string { return unique.Make(s).Value() }
