package lab

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// The node proxy's environment is ztunnel's, complete: where pilot's TLS
// listener and CA root are, its token, the node's ZDS socket, who the node
// proxy is and how many workers it runs.
func TestNodeProxyEnv(t *testing.T) {
	got := nodeProxyEnv(nodeProxyEnvConfig{node: "node-1", ip: netip.MustParseAddr("10.233.0.4"),
		pilot: netip.MustParseAddrPort("10.233.0.1:40012"), rootCert: "/out/pilot-data/ca/root-cert.pem",
		token: "/tmp/meshperf-secrets-abc/ztunnel-node-1/var/run/secrets/tokens/istio-token", zds: "/tmp/meshperf-zds-abc/node-1.sock", workers: 2})
	want := []string{
		"XDS_ADDRESS=https://10.233.0.1:40012",
		"CA_ADDRESS=https://10.233.0.1:40012",
		"XDS_ROOT_CA=/out/pilot-data/ca/root-cert.pem",
		"CA_ROOT_CA=/out/pilot-data/ca/root-cert.pem",
		"AUTH_TOKEN=/tmp/meshperf-secrets-abc/ztunnel-node-1/var/run/secrets/tokens/istio-token",
		"ALT_XDS_HOSTNAME=istiod.istio-system.svc",
		"ALT_CA_HOSTNAME=istiod.istio-system.svc",
		"INPOD_UDS=/tmp/meshperf-zds-abc/node-1.sock",
		"TRUST_DOMAIN=cluster.local",
		"CLUSTER_ID=Kubernetes",
		"NODE_NAME=node-1",
		"INSTANCE_IP=10.233.0.4",
		"POD_NAME=ztunnel-node-1",
		"POD_NAMESPACE=istio-system",
		"SERVICE_ACCOUNT=ztunnel",
		"ZTUNNEL_WORKER_THREADS=2",
		"ISTIO_META_DNS_CAPTURE=false",
		"RUST_LOG=info",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodeProxyEnv:\n got %q\nwant %q", got, want)
	}
}

// Which binary each node runs: meshperf-proxy in the node proxy's role in
// the ambient modes, ztunnel (asked for its version) in the ztunnel modes
// on every node, or on the one node the interop test names.
func TestNodeProxyCommand(t *testing.T) {
	zt := writeScript(t, `echo 'version.BuildInfo{Version:"1.24.0"}'`+"\n")
	n1, n2 := &node{name: NodeClient}, &node{name: NodeServer}
	relativeProxy, err := filepath.Abs("bin/meshperf-proxy")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg       Config
		mode      scenario.Mode
		n         *node
		path, bin string
		args0     string
	}{
		{Config{ProxyBin: "/bin/meshperf-proxy"}, scenario.Ambient, n1, "/bin/meshperf-proxy", "meshperf-proxy", "--proxy-type"},
		{Config{ProxyBin: "/bin/meshperf-proxy", ZtunnelBin: zt}, scenario.Ambient, n2, "/bin/meshperf-proxy", "meshperf-proxy", "--proxy-type"},
		{Config{ProxyBin: "/bin/meshperf-proxy", ZtunnelBin: zt}, scenario.AmbientZtunnel, n1, zt, "ztunnel 1.24.0", "proxy"},
		{Config{ProxyBin: "/bin/meshperf-proxy", ZtunnelBin: zt}, scenario.AmbientZtunnel, n2, zt, "ztunnel 1.24.0", "proxy"},
		{Config{ProxyBin: "/bin/meshperf-proxy", ZtunnelBin: zt, ZtunnelNode: NodeServer}, scenario.Ambient, n1, "/bin/meshperf-proxy", "meshperf-proxy", "--proxy-type"},
		{Config{ProxyBin: "/bin/meshperf-proxy", ZtunnelBin: zt, ZtunnelNode: NodeServer}, scenario.Ambient, n2, zt, "ztunnel 1.24.0", "proxy"},
		// A relative -proxy (bin/meshperf-proxy) is made absolute: the node
		// proxy runs in a directory of its own, where it was not found.
		{Config{ProxyBin: "bin/meshperf-proxy"}, scenario.Ambient, n1, relativeProxy, "meshperf-proxy", "--proxy-type"},
	} {
		l := &lab{cfg: c.cfg}
		path, args, bin, err := l.nodeProxyCommand(c.n, c.mode)
		if err != nil || path != c.path || bin != c.bin || args[0] != c.args0 {
			t.Errorf("%s in %s with ztunnel %q on %q: %s %v (%s), %v", c.n.name, c.mode, c.cfg.ZtunnelBin, c.cfg.ZtunnelNode, path, args, bin, err)
		}
	}
}

// The client's node proxy is ready for a run when it knows the server
// workload and, in the waypoint modes, the waypoint's workload and the
// server Service with its waypoint, read from either proxy's dump:
// meshperf-proxy's (services by key) and ztunnel's (a list).
func TestClientNodeProxyLacks(t *testing.T) {
	const uid, waypointUID = `"Kubernetes//Pod/lab/server"`, `"Kubernetes//Pod/lab/waypoint"`
	ours := `{"workloads": {"workloads": {` + uid + `: {}, ` + waypointUID + `: {}}, "services": {"lab/server.lab.svc.cluster.local":
	  {"hostname": "server.lab.svc.cluster.local", "vips": ["10.96.0.10"], "waypoint": {"address": "10.233.0.7:15008"}}}}}`
	ztunnels := `{"workloads": [{"uid": ` + uid + `}, {"uid": ` + waypointUID + `}], "services": [{"hostname": "server.lab.svc.cluster.local",
	  "waypoint": {"destination": "/10.233.0.7", "hboneMtlsPort": 15008}}]}`
	unbound := `{"workloads": [{"uid": ` + uid + `}, {"uid": ` + waypointUID + `}], "services": [{"hostname": "server.lab.svc.cluster.local"}]}`
	// Bound, but the waypoint's workload has not come (the binding may
	// come first): every connection would be closed.
	noWaypoint := `{"workloads": [{"uid": ` + uid + `}], "services": [{"hostname": "server.lab.svc.cluster.local",
	  "waypoint": {"destination": "/10.233.0.7", "hboneMtlsPort": 15008}}]}`
	// A workload whose uid only starts with the server's is another one.
	serverTwo := `{"workloads": [{"uid": "Kubernetes//Pod/lab/server-2"}]}`
	for _, c := range []struct {
		name, dump string
		mode       scenario.Mode
		lack       string
	}{
		{"L4", unbound, scenario.Ambient, ""},
		{"L4 without the server", `{"workloads": []}`, scenario.Ambient, "does not know the server workload Kubernetes//Pod/lab/server"},
		{"waypoint, ours", ours, scenario.AmbientWaypoint, ""},
		{"waypoint, ztunnel's", ztunnels, scenario.AmbientWaypointZtunnel, ""},
		{"waypoint not bound yet", unbound, scenario.AmbientWaypoint, "does not bind the service server.lab.svc.cluster.local to a waypoint"},
		{"bound, waypoint workload missing", noWaypoint, scenario.AmbientWaypoint, "does not know the waypoint workload Kubernetes//Pod/lab/waypoint"},
		{"bound, waypoint workload missing, ztunnel", noWaypoint, scenario.AmbientWaypointZtunnel, "does not know the waypoint workload"},
		{"L4 without the waypoint's workload", noWaypoint, scenario.Ambient, ""},
		{"another workload's uid", serverTwo, scenario.Ambient, "does not know the server workload"},
		{"waypoint, not JSON", "{" + uid + waypointUID, scenario.AmbientWaypoint, "not JSON"},
	} {
		lack := clientNodeProxyLacks([]byte(c.dump), ServerPod, c.mode)
		if c.lack == "" && lack != "" || c.lack != "" && !strings.Contains(lack, c.lack) {
			t.Errorf("%s: %q, want %q", c.name, lack, c.lack)
		}
	}
}
