package lab

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// Identities are the names a run's checks look for in the proxies'
// counters: the server Service's host and the client's and waypoint's
// SPIFFE ids, which depend on the namespace the lab's workloads are in.
type Identities struct {
	ServerHost, Client, Waypoint string
}

// LabIdentities are the netns lab's: namespace lab.
func LabIdentities() Identities {
	return Identities{ServerHost: ServerHost(), Client: SPIFFEID(ClientSA), Waypoint: SPIFFEID(WaypointSA)}
}

// TrafficChecks compare each proxy's Istio counters before and after a run:
// every sidecar the mode puts on the path must have counted the run's calls
// (connections for tcp; gRPC calls as gRPC), and with mTLS the server sidecar
// must have seen them as mutual TLS from the client's identity. A mode without a sidecar
// on a side has nothing to check there. In the waypoint modes the waypoint
// must have counted every call as reporter="waypoint". The ambient modes'
// node proxies are checked by nodeProxyChecks. ids name the server's
// Service and the client's identity where the run took place.
func TrafficChecks(spec scenario.RunSpec, calls int64, before, after MetricsSnapshot, ids Identities) []Check {
	metric, unit, want := "istio_requests_total", "requests", float64(calls)
	switch spec.Protocol {
	case scenario.TCP:
		metric, unit, want = "istio_tcp_connections_opened_total", "connections", float64(spec.Connections)
	case scenario.GRPC:
		unit = "gRPC requests"
	}
	want = max(want, 1)
	delta := func(b, a string, labels map[string]string) float64 {
		// gRPC calls must have been seen as gRPC (request_protocol="grpc"),
		// which also shows they crossed each sidecar as HTTP/2.
		if spec.Protocol == scenario.GRPC {
			labels["request_protocol"] = "grpc"
		}
		return SumMetric(a, metric, labels) - SumMetric(b, metric, labels)
	}
	check := func(name string, got float64) Check {
		return Check{Name: name, OK: got >= want,
			Detail: fmt.Sprintf("%.0f %s counted, want >= %.0f", got, unit, want)}
	}
	client, server := spec.Mode.Sidecars()
	var out []Check
	if client {
		got := delta(before.Client, after.Client, map[string]string{"reporter": "source", "destination_service": ids.ServerHost})
		out = append(out, check(clientSidecar, got))
	}
	if server {
		got := delta(before.Server, after.Server, map[string]string{"reporter": "destination"})
		out = append(out, check(serverSidecar, got))
	}
	if spec.Mode.Waypoint() {
		got := delta(before.Waypoint, after.Waypoint, map[string]string{"reporter": "waypoint"})
		out = append(out, check(waypointRole, got))
	}
	if spec.Mode.NodeProxies() {
		return append(out, nodeProxyChecks(spec, before, after, ids)...)
	}
	if spec.MTLS {
		got := delta(before.Server, after.Server, map[string]string{"reporter": "destination",
			"connection_security_policy": "mutual_tls", "source_principal": ids.Client})
		out = append(out, check("mutual_tls from "+ids.Client, got))
	}
	return out
}

// nodeProxyChecks prove the ambient path from the node proxies' L4
// counters, whatever the protocol: the client's node proxy opened the
// load generator's connections as their source, the server's received them
// as their destination, in mutual TLS from the client's identity. In the
// waypoint modes the server's node proxy receives the waypoint's
// connections instead, in mutual TLS from the waypoint's identity. The
// waypoint opens them as its pool needs and keeps them from one run to the
// next, so a later run of the mode may open none: there the server side
// counts the connections since the mode was set up (the node proxies start
// with it), at least one; that the run's calls took them is the waypoint's
// check (its only way to the server pod is HBONE to the pod's node proxy).
func nodeProxyChecks(spec scenario.RunSpec, before, after MetricsSnapshot, ids Identities) []Check {
	const metric = "istio_tcp_connections_opened_total"
	want := float64(max(spec.Connections, 1))
	serverWant, peer, serverBefore, since := want, ids.Client, before.ServerNode, ""
	if spec.Mode.Waypoint() {
		serverWant, peer, serverBefore, since = 1, ids.Waypoint, "", " since the mode was set up"
	}
	delta := func(b, a string, labels map[string]string) float64 {
		return SumMetric(a, metric, labels) - SumMetric(b, metric, labels)
	}
	check := func(name string, got, want float64, since string) Check {
		return Check{Name: name, OK: got >= want, Detail: fmt.Sprintf("%.0f connections counted%s, want >= %.0f", got, since, want)}
	}
	return []Check{
		check(clientNodeProxy, delta(before.ClientNode, after.ClientNode, map[string]string{"reporter": "source"}), want, ""),
		check(serverNodeProxy, delta(serverBefore, after.ServerNode, map[string]string{"reporter": "destination"}), serverWant, since),
		check("mutual_tls from "+peer, delta(serverBefore, after.ServerNode, map[string]string{
			"reporter": "destination", "connection_security_policy": "mutual_tls", "source_principal": peer}), serverWant, since),
	}
}
