package lab

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// The lab's names in the mesh. Istio's harness calls its pods fortioclient
// and fortioserver; ours are the client and server workloads of one
// namespace, so identities read spiffe://cluster.local/ns/lab/sa/client.
const (
	Namespace     = "lab"
	ServerService = "server"
	ServerSA      = "server"
	ClientSA      = "client"
	// The pods' names, which are also their WorkloadEntries' names when
	// the lab registers them.
	ClientPod = "client"
	ServerPod = "server"
)

// The ambient-waypoint modes' waypoint: a pod of the lab namespace on the
// server's node, the Gateway API Gateway that declares it, and its
// identity, spiffe://cluster.local/ns/lab/sa/waypoint.
const (
	WaypointPod     = "waypoint"
	WaypointGateway = "waypoint"
	WaypointSA      = "waypoint"
)

// ServerVIP is the server Service's cluster IP in the waypoint modes. A
// waypoint for services (istio.io/waypoint-for: service, Istio's default)
// serves traffic addressed to a service VIP, as a Kubernetes client calling
// the Service by name sends it; the load generator then calls the VIP. No
// packet to it leaves the client pod: the in-pod rules hand the connection
// to the node proxy, which resolves the VIP from workload discovery. The
// other modes keep the Service without one and call the pod's address,
// which is what their sidecars' per-port listeners and checks expect.
var ServerVIP = netip.MustParseAddr("10.96.0.10")

// Service ports, named so that the control plane picks the protocol from
// the name as Istio does (http, grpc, tcp prefixes).
const (
	ServiceHTTPPort = 8080
	ServiceGRPCPort = 8079
	ServiceTCPPort  = 8078
)

// AppPorts are where the echo server listens: the Service's targetPorts. In
// netns mode they equal the service ports (each pod has its own ports); in
// loopback mode they are free host ports, as pods share the host's.
type AppPorts struct {
	HTTP, GRPC, TCP int
}

// ForProtocol is the app port that serves p.
func (a AppPorts) ForProtocol(p scenario.Protocol) int {
	switch p {
	case scenario.GRPC:
		return a.GRPC
	case scenario.TCP:
		return a.TCP
	}
	return a.HTTP
}

// servicePort is the Service port that carries p.
func servicePort(p scenario.Protocol) int {
	switch p {
	case scenario.GRPC:
		return ServiceGRPCPort
	case scenario.TCP:
		return ServiceTCPPort
	}
	return ServiceHTTPPort
}

// ServerHost is the server Service's cluster-local name.
func ServerHost() string { return ServerService + "." + Namespace + ".svc.cluster.local" }

// SPIFFEID is the identity of a service account in the lab namespace.
func SPIFFEID(sa string) string { return "spiffe://cluster.local/ns/" + Namespace + "/sa/" + sa }

// PeerAuthMode is the namespace's PeerAuthentication for a run: STRICT when
// the run is mTLS (both sidecars with mtls on, or an ambient mode, as
// Istio's benchmark runs ambient); DISABLE when both sidecars run
// with mtls off (so the sidecars really talk plain text, as Istio's
// benchmark does with mTLS off); PERMISSIVE otherwise, Istio's default,
// which lets a client without a sidecar reach a server sidecar.
func PeerAuthMode(r scenario.RunSpec) string {
	switch {
	case r.MTLS:
		return "STRICT"
	case r.Mode == scenario.BothSidecars:
		return "DISABLE"
	}
	return "PERMISSIVE"
}

// PodAddrs are the lab pods' addresses the mesh configuration names; the
// waypoint's is unset without a waypoint mode.
type PodAddrs struct {
	Client, Server, Waypoint netip.Addr
}

// MeshConfig is the configuration the lab applies for one mode.
type MeshConfig struct {
	// Base is always applied: the namespace, the server Service and the
	// namespace's PeerAuthentication, plus a DestinationRule with TLS
	// DISABLE when both sidecars run without mTLS.
	Base string
	// DestinationRule reports whether Base holds the DestinationRule.
	DestinationRule bool
	// WorkloadEntry registers the server pod when it has no sidecar (a
	// sidecar registers its pod from its node metadata); empty otherwise.
	WorkloadEntry string
	// ClientWorkloadEntry registers the client pod in the ambient modes,
	// where the control plane must know it (its identity, its node proxy's
	// workload) and no sidecar registers it; empty otherwise.
	ClientWorkloadEntry string
	// Waypoint declares the waypoint in the waypoint modes: its Gateway and
	// its pod's WorkloadEntry; empty otherwise.
	Waypoint string
}

// ambientLabel enrols a namespace (or a workload) in ambient.
const ambientLabel = "istio.io/dataplane-mode: ambient"

// useWaypointLabel binds the namespace's services to the waypoint.
const useWaypointLabel = "istio.io/use-waypoint: " + WaypointGateway

// MeshYAML renders the configuration for a run's mode. In the ambient
// modes the namespace carries the ambient label, and both pods are
// WorkloadEntries named as the pods, which is how ZDS and workload
// discovery agree on their uids. The waypoint modes add the waypoint (its
// Gateway and its pod), bind the namespace to it with istio.io/use-waypoint
// and give the Service its VIP; every other mode renders the namespace and
// the Service without them, so applying it unbinds the waypoint.
func MeshYAML(r scenario.RunSpec, pods PodAddrs, ports AppPorts) MeshConfig {
	var b strings.Builder
	labels, clusterIP := "", ""
	switch {
	case r.Mode.Waypoint():
		labels = ", labels: {" + ambientLabel + ", " + useWaypointLabel + "}"
		clusterIP = "\n  clusterIP: " + ServerVIP.String()
	case r.Mode.NodeProxies():
		labels = ", labels: {" + ambientLabel + "}"
	}
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s%[10]s}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:%[11]s
  selector: {app: server}
  ports:
  - {name: http, port: %[3]d, targetPort: %[4]d, protocol: TCP}
  - {name: grpc, port: %[5]d, targetPort: %[6]d, protocol: TCP}
  - {name: tcp, port: %[7]d, targetPort: %[8]d, protocol: TCP}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: %[1]s}
spec:
  mtls: {mode: %[9]s}
`, Namespace, ServerService, ServiceHTTPPort, ports.HTTP, ServiceGRPCPort, ports.GRPC,
		ServiceTCPPort, ports.TCP, PeerAuthMode(r), labels, clusterIP)
	mc := MeshConfig{}
	if PeerAuthMode(r) == "DISABLE" {
		mc.DestinationRule = true
		fmt.Fprintf(&b, `---
%s`, destinationRuleYAML())
	}
	mc.Base = b.String()
	if _, server := r.Mode.Sidecars(); !server {
		node := ""
		if r.Mode.NodeProxies() {
			node = NodeServer
		}
		mc.WorkloadEntry = workloadEntryYAML(ServerPod, pods.Server, ServerSA, "app: server", node)
	}
	if r.Mode.NodeProxies() {
		mc.ClientWorkloadEntry = workloadEntryYAML(ClientPod, pods.Client, ClientSA, "app: client", NodeClient)
	}
	if r.Mode.Waypoint() {
		mc.Waypoint = waypointYAML(pods.Waypoint)
	}
	return mc
}

// waypointYAML declares the waypoint as Istio's `istioctl waypoint apply`
// does, with the address Kubernetes would assign given by hand: a Gateway
// of class istio-waypoint for services, listening for HBONE, at the
// waypoint pod's address; and the pod, on the server's node, as a
// WorkloadEntry labelled with its Gateway's name, which is how workload
// discovery knows it as that Gateway's waypoint (with its identity, which
// node proxies check).
func waypointYAML(ip netip.Addr) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: %[2]s
  namespace: %[1]s
  labels: {istio.io/waypoint-for: service}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: %[3]d, protocol: HBONE}]
  addresses: [{type: IPAddress, value: %[4]s}]
---
%[5]s`, Namespace, WaypointGateway, pod.HBONEPort, ip,
		workloadEntryYAML(WaypointPod, ip, WaypointSA, waypointGatewayLabel+": "+WaypointGateway, NodeServer))
}

// waypointGatewayLabel names a waypoint's Gateway on its pod (Kubernetes
// puts it on the Deployment's pods) and in its proxy's node metadata.
const waypointGatewayLabel = "gateway.networking.k8s.io/gateway-name"

func destinationRuleYAML() string { return tlsDisableRuleYAML(ServerService, ServerHost()) }

// tlsDisableRuleYAML is a DestinationRule named name that turns TLS off
// towards host, as both sidecars without mTLS need.
func tlsDisableRuleYAML(name, host string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  host: %[3]s
  trafficPolicy:
    tls: {mode: DISABLE}
`, Namespace, name, host)
}

// nodeLabel names the node a WorkloadEntry's pod runs on, which workload
// discovery reports as the workload's node (pilot reads it; a Kubernetes pod
// has spec.nodeName instead).
const nodeLabel = "topology.istio.io/node"

// workloadEntryYAML registers the pod name (the lab's pod of that name) at
// ip, with its service account, labels (flow-style "key: value" pairs) and,
// in the ambient modes, its node.
func workloadEntryYAML(name string, ip netip.Addr, sa, labels, node string) string {
	if node != "" {
		labels += ", " + nodeLabel + ": " + node
	}
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  address: %[3]s
  labels: {%[5]s}
  serviceAccount: %[4]s
`, Namespace, name, ip, sa, labels)
}
