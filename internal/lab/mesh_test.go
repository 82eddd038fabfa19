package lab

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// decodeValid decodes YAML as the control plane does and validates every
// object, returning "Kind/name" of each.
func decodeValid(t *testing.T, name, yaml string) []string {
	t.Helper()
	rs, err := config.Decode(name, []byte(yaml))
	if err != nil {
		t.Fatalf("%s: pilot rejects the lab's YAML: %v\n%s", name, err, yaml)
	}
	var kinds []string
	for _, r := range rs {
		if err := config.Validate(r); err != nil {
			t.Fatalf("%s: pilot's validation: %v\n%s", name, err, yaml)
		}
		kinds = append(kinds, r.Key().String())
	}
	return kinds
}

func TestMeshYAMLPerModePassesPilotValidation(t *testing.T) {
	clientIP, serverIP := netip.MustParseAddr("10.233.0.2"), netip.MustParseAddr("10.233.0.3")
	ports := AppPorts{HTTP: 8080, GRPC: 8079, TCP: 8078}
	cases := []struct {
		mode       scenario.Mode
		mtls       bool
		peerAuth   string
		dr, wentry bool
	}{
		{scenario.NoMesh, true, "PERMISSIVE", false, true},
		{scenario.ServerSidecar, true, "PERMISSIVE", false, false},
		{scenario.ClientSidecar, true, "PERMISSIVE", false, true},
		{scenario.BothSidecars, true, "STRICT", false, false},
		{scenario.BothSidecars, false, "DISABLE", true, false},
		{scenario.ServerSidecar, false, "PERMISSIVE", false, false},
	}
	for _, c := range cases {
		spec := scenario.RunSpec{Mode: c.mode, MTLS: c.mtls && c.mode == scenario.BothSidecars, Protocol: scenario.HTTP}
		mc := MeshYAML(spec, PodAddrs{Client: clientIP, Server: serverIP}, ports)
		kinds := decodeValid(t, string(c.mode), mc.Base)
		joined := strings.Join(kinds, " ")
		for _, want := range []string{"Namespace", "Service", "PeerAuthentication"} {
			if !strings.Contains(joined, want) {
				t.Errorf("%s mtls=%v: no %s in %s", c.mode, c.mtls, want, joined)
			}
		}
		if !strings.Contains(mc.Base, "mode: "+c.peerAuth) {
			t.Errorf("%s mtls=%v: want PeerAuthentication %s:\n%s", c.mode, c.mtls, c.peerAuth, mc.Base)
		}
		if got := strings.Contains(joined, "DestinationRule"); got != c.dr || mc.DestinationRule != c.dr {
			t.Errorf("%s mtls=%v: DestinationRule %v (flag %v), want %v", c.mode, c.mtls, got, mc.DestinationRule, c.dr)
		}
		if mc.ClientWorkloadEntry != "" || mc.Waypoint != "" || strings.Contains(mc.Base, "dataplane-mode") || strings.Contains(mc.Base, "clusterIP") {
			t.Errorf("%s: enrolled in ambient:\n%s\n%s", c.mode, mc.Base, mc.ClientWorkloadEntry)
		}
		if (mc.WorkloadEntry != "") != c.wentry {
			t.Errorf("%s: WorkloadEntry %q, want one: %v", c.mode, mc.WorkloadEntry, c.wentry)
		}
		if mc.WorkloadEntry != "" {
			decodeValid(t, "workloadentry", mc.WorkloadEntry)
			if !strings.Contains(mc.WorkloadEntry, "address: 10.233.0.3") {
				t.Errorf("WorkloadEntry does not carry the server pod's address:\n%s", mc.WorkloadEntry)
			}
		}
	}
	// Loopback: the Service's targetPorts are the app's host ports.
	mc := MeshYAML(scenario.RunSpec{Mode: scenario.NoMesh}, PodAddrs{Client: clientIP, Server: serverIP}, AppPorts{HTTP: 40001, GRPC: 40002, TCP: 40003})
	decodeValid(t, "loopback", mc.Base)
	if !strings.Contains(mc.Base, "port: 8080, targetPort: 40001") {
		t.Errorf("http targetPort not the app's port:\n%s", mc.Base)
	}
	decodeValid(t, "destinationrule", destinationRuleYAML())
}

// Ambient: the namespace enrolled, STRICT mTLS, and both pods registered
// as WorkloadEntries named as the pods (their uids in ZDS and WDS), each
// with its address, identity, app label and node; pilot accepts all of it.
func TestMeshYAMLAmbient(t *testing.T) {
	clientIP, serverIP := netip.MustParseAddr("10.233.0.2"), netip.MustParseAddr("10.233.0.3")
	spec := scenario.RunSpec{Mode: scenario.Ambient, MTLS: true, Protocol: scenario.HTTP}
	mc := MeshYAML(spec, PodAddrs{Client: clientIP, Server: serverIP}, AppPorts{HTTP: 8080, GRPC: 8079, TCP: 8078})
	if mc.Waypoint != "" || strings.Contains(mc.Base, "use-waypoint") || strings.Contains(mc.Base, "clusterIP") {
		t.Errorf("ambient (L4) has a waypoint:\n%s\n%s", mc.Base, mc.Waypoint)
	}
	if got := strings.Join(decodeValid(t, "ambient", mc.Base), " "); !strings.Contains(got, "PeerAuthentication") {
		t.Errorf("ambient base has %s", got)
	}
	for _, want := range []string{"metadata: {name: lab, labels: {istio.io/dataplane-mode: ambient}}", "mode: STRICT"} {
		if !strings.Contains(mc.Base, want) {
			t.Errorf("ambient base lacks %q:\n%s", want, mc.Base)
		}
	}
	for _, c := range []struct{ yaml, name, ip, sa, app, node string }{
		{mc.ClientWorkloadEntry, ClientPod, "10.233.0.2", ClientSA, "client", NodeClient},
		{mc.WorkloadEntry, ServerPod, "10.233.0.3", ServerSA, "server", NodeServer},
	} {
		decodeValid(t, "workloadentry-"+c.name, c.yaml)
		for _, want := range []string{"name: " + c.name + ",", "address: " + c.ip, "serviceAccount: " + c.sa,
			"labels: {app: " + c.app + ", topology.istio.io/node: " + c.node + "}"} {
			if !strings.Contains(c.yaml, want) {
				t.Errorf("WorkloadEntry %s lacks %q:\n%s", c.name, want, c.yaml)
			}
		}
	}
}

// The waypoint modes: the namespace enrolled and bound to the waypoint, the
// Service with its VIP, and the waypoint declared as a Gateway at the
// waypoint pod's address plus its pod as a WorkloadEntry on the server's
// node, labelled with the Gateway's name and without the server's app
// label (the Service must not select it); pilot accepts all of it.
func TestMeshYAMLWaypoint(t *testing.T) {
	pods := PodAddrs{Client: netip.MustParseAddr("10.233.0.2"), Server: netip.MustParseAddr("10.233.0.3"),
		Waypoint: netip.MustParseAddr("10.233.0.7")}
	for _, mode := range []scenario.Mode{scenario.AmbientWaypoint, scenario.AmbientWaypointZtunnel} {
		spec := scenario.RunSpec{Mode: mode, MTLS: true, Protocol: scenario.HTTP}
		mc := MeshYAML(spec, pods, AppPorts{HTTP: 8080, GRPC: 8079, TCP: 8078})
		decodeValid(t, string(mode), mc.Base)
		for _, want := range []string{
			"metadata: {name: lab, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}",
			"spec:\n  clusterIP: 10.96.0.10\n  selector: {app: server}", "mode: STRICT"} {
			if !strings.Contains(mc.Base, want) {
				t.Errorf("%s base lacks %q:\n%s", mode, want, mc.Base)
			}
		}
		kinds := strings.Join(decodeValid(t, "waypoint", mc.Waypoint), " ")
		if kinds != "Gateway.gateway.networking.k8s.io/lab/waypoint WorkloadEntry/lab/waypoint" {
			t.Errorf("%s: waypoint objects %s", mode, kinds)
		}
		for _, want := range []string{"gatewayClassName: istio-waypoint", "labels: {istio.io/waypoint-for: service}",
			"listeners: [{name: mesh, port: 15008, protocol: HBONE}]", "addresses: [{type: IPAddress, value: 10.233.0.7}]",
			"address: 10.233.0.7", "serviceAccount: waypoint",
			"labels: {gateway.networking.k8s.io/gateway-name: waypoint, topology.istio.io/node: node-2}"} {
			if !strings.Contains(mc.Waypoint, want) {
				t.Errorf("%s waypoint lacks %q:\n%s", mode, want, mc.Waypoint)
			}
		}
		if strings.Contains(mc.Waypoint, "app:") {
			t.Errorf("%s: the waypoint's entry has an app label the Service could select:\n%s", mode, mc.Waypoint)
		}
	}
}
