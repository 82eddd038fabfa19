package lab

import (
	"fmt"
	"net/netip"
	"strings"

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
}

// ambientLabel enrols a namespace (or a workload) in ambient.
const ambientLabel = "istio.io/dataplane-mode: ambient"

// MeshYAML renders the configuration for a run's mode. In the ambient
// modes the namespace carries the ambient label, and both pods are
// WorkloadEntries named as the pods, which is how ZDS and workload
// discovery agree on their uids.
func MeshYAML(r scenario.RunSpec, clientIP, serverIP netip.Addr, ports AppPorts) MeshConfig {
	var b strings.Builder
	labels := ""
	if r.Mode.NodeProxies() {
		labels = ", labels: {" + ambientLabel + "}"
	}
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s%[10]s}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
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
		ServiceTCPPort, ports.TCP, PeerAuthMode(r), labels)
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
		mc.WorkloadEntry = workloadEntryYAML(ServerPod, serverIP, ServerSA, "server", node)
	}
	if r.Mode.NodeProxies() {
		mc.ClientWorkloadEntry = workloadEntryYAML(ClientPod, clientIP, ClientSA, "client", NodeClient)
	}
	return mc
}

func destinationRuleYAML() string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  host: %[3]s
  trafficPolicy:
    tls: {mode: DISABLE}
`, Namespace, ServerService, ServerHost())
}

// nodeLabel names the node a WorkloadEntry's pod runs on, which workload
// discovery reports as the workload's node (pilot reads it; a Kubernetes pod
// has spec.nodeName instead).
const nodeLabel = "topology.istio.io/node"

// workloadEntryYAML registers the pod name (the lab's pod of that name) at
// ip, with its service account, app label and, in the ambient modes, its
// node.
func workloadEntryYAML(name string, ip netip.Addr, sa, app, node string) string {
	labels := "app: " + app
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
