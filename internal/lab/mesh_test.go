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
	serverIP := netip.MustParseAddr("10.233.0.3")
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
		mc := MeshYAML(spec, serverIP, ports)
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
	mc := MeshYAML(scenario.RunSpec{Mode: scenario.NoMesh}, serverIP, AppPorts{HTTP: 40001, GRPC: 40002, TCP: 40003})
	decodeValid(t, "loopback", mc.Base)
	if !strings.Contains(mc.Base, "port: 8080, targetPort: 40001") {
		t.Errorf("http targetPort not the app's port:\n%s", mc.Base)
	}
	decodeValid(t, "destinationrule", destinationRuleYAML())
}
