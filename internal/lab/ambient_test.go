package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// ztunnelEnv names a ztunnel binary built beside the project (docs/lab.md)
// for the interoperability test.
const ztunnelEnv = "MESHPERF_ZTUNNEL_BIN"

// ambientScenario is a short ambient run: 2 s at 500 qps over 4 connections.
func ambientScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	return tinyScenario(t, []scenario.Mode{scenario.Ambient}, []int{4})
}

// needAmbientBinaries fails (never skips) when meshperf-proxy is not
// built: the ambient test is the node proxy's end-to-end test, which
// scripts/test builds before it runs.
func needAmbientBinaries(t *testing.T) {
	t.Helper()
	if proxyBinary() == "" {
		t.Fatal("meshperf-proxy is not built: cd proxy && cargo build --release, or set MESHPERF_PROXY_BIN")
	}
}

// checkAmbientRun asserts that one ambient run carried its load through
// both node proxies, in mutual TLS from the client's identity, and measured
// each node proxy; nodeProxies are what Report.NodeProxies must say.
func checkAmbientRun(t *testing.T, rep *Report, nodeProxies []string) {
	t.Helper()
	checkAmbientMode(t, rep, scenario.Ambient, nodeProxies)
}

// checkAmbientMode is checkAmbientRun for either ambient mode: in the
// waypoint mode the waypoint must have counted every call and been
// measured, and the server's node proxy must have seen the waypoint's
// identity instead of the client's.
func checkAmbientMode(t *testing.T, rep *Report, mode scenario.Mode, nodeProxies []string) {
	t.Helper()
	if len(rep.Outcomes) != 1 {
		t.Fatalf("%d runs, want 1", len(rep.Outcomes))
	}
	o := rep.Outcomes[0]
	r := o.Run
	if r.Failed {
		t.Fatalf("%s failed: %s", r.Label, r.FailureReason)
	}
	if r.Mode != string(mode) || r.Network != string(pod.KindNetns) || !r.MTLS || r.Calls < 300 || r.Errors != 0 {
		t.Errorf("%s: mode %q network %q mTLS %v, %d calls, %d errors", r.Label, r.Mode, r.Network, r.MTLS, r.Calls, r.Errors)
	}
	want := []string{clientNodeProxy, serverNodeProxy, "mutual_tls from " + SPIFFEID(ClientSA)}
	roles, notRoles := []string{results.RoleClientNodeProxy, results.RoleServerNodeProxy}, []string{results.RoleWaypoint}
	if mode.Waypoint() {
		want = []string{waypointRole, clientNodeProxy, serverNodeProxy, "mutual_tls from " + SPIFFEID(WaypointSA)}
		roles, notRoles = append(roles, results.RoleWaypoint), nil
	}
	var names []string
	for _, c := range o.Checks {
		names = append(names, c.Name)
		if !c.OK {
			t.Errorf("%s: check %s failed: %s", r.Label, c.Name, c.Detail)
		}
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("%s: checks %q, want %q", r.Label, names, want)
	}
	for _, role := range roles {
		if p, ok := r.Process(role); !ok || p.VCPU <= 0 || p.RSSMB <= 0 {
			t.Errorf("%s: process %s: present %v, %+v", r.Label, role, ok, p)
		}
	}
	for _, role := range append(notRoles, results.RoleClientSidecar, results.RoleServerSidecar) {
		if _, ok := r.Process(role); ok {
			t.Errorf("%s: a %s in an %s run", r.Label, role, mode)
		}
	}
	if strings.Join(rep.NodeProxies, "|") != strings.Join(nodeProxies, "|") {
		t.Errorf("node proxies %q, want %q", rep.NodeProxies, nodeProxies)
	}
	checkOutputs(t, rep)
	checkNothingLeft(t, rep)
}

// Ambient L4 end to end: the client pod on node-1 and the server pod on
// node-2, each node's meshperf-proxy in the node proxy's role, configured
// by pilot's workload discovery and CA over TLS and handed its pod over
// ZDS; the load generator's connections are redirected in the client pod
// to node-1's proxy, carried over HBONE to node-2's and delivered to the
// echo server, and both node proxies' counters show it.
func TestAmbientL4(t *testing.T) {
	testenv.NeedNetns(t)
	needAmbientBinaries(t)
	rep := runLab(t, pod.KindNetns, ambientScenario(t), nil)
	checkAmbientRun(t, rep, []string{
		clientNodeProxy + " (" + NodeClient + "): meshperf-proxy",
		serverNodeProxy + " (" + NodeServer + "): meshperf-proxy",
	})
}

// Ambient L4+L7 end to end: as TestAmbientL4, with a waypoint pod on
// node-2 running meshperf-proxy's waypoint role, declared as a Gateway
// and bound to the lab namespace; the load calls the server Service's VIP,
// which node-1's proxy sends over HBONE to the waypoint, which routes it
// and sends it over HBONE to node-2's proxy. The waypoint counted every
// call, node-2's proxy saw the waypoint's identity, and the waypoint is
// measured beside the node proxies.
func TestAmbientWaypoint(t *testing.T) {
	testenv.NeedNetns(t)
	needAmbientBinaries(t)
	rep := runLab(t, pod.KindNetns, tinyScenario(t, []scenario.Mode{scenario.AmbientWaypoint}, []int{4}), nil)
	checkAmbientMode(t, rep, scenario.AmbientWaypoint, []string{
		clientNodeProxy + " (" + NodeClient + "): meshperf-proxy",
		serverNodeProxy + " (" + NodeServer + "): meshperf-proxy",
	})
}

// The real ztunnel and meshperf-proxy carry traffic between them both
// ways: ztunnel as the client's node proxy with meshperf-proxy on the
// server's node, then the other way round (issue 12, part 4).
func TestZtunnelInterop(t *testing.T) {
	zt := os.Getenv(ztunnelEnv)
	if zt == "" {
		t.Skipf("needs ztunnel: set %s to a ztunnel binary built as docs/lab.md says", ztunnelEnv)
	}
	testenv.NeedNetns(t)
	needAmbientBinaries(t)
	zc, err := ztunnelComponent(zt)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []string{NodeClient, NodeServer} {
		t.Run("ztunnel on "+on, func(t *testing.T) {
			rep := runConfig(t, Config{Scenario: ambientScenario(t), Network: pod.KindNetns, ZtunnelBin: zt, ZtunnelNode: on})
			client, server := zc.String(), "meshperf-proxy"
			if on == NodeServer {
				client, server = server, client
			}
			checkAmbientRun(t, rep, []string{
				clientNodeProxy + " (" + NodeClient + "): " + client,
				serverNodeProxy + " (" + NodeServer + "): " + server,
			})
		})
	}
}
