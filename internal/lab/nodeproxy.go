package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/internal/lab/inpod"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
)

// The ambient modes' nodes, as Istio's benchmark places its pods: the
// client pod on one node, the server pod on another, each node with its own
// node proxy. A node is a network namespace on the lab's bridge like a pod,
// with no app: only its node proxy, which reaches into the pods it serves.
const (
	NodeClient = "node-1"
	NodeServer = "node-2"
)

// The node proxies' roles: their processes' names and their checks' names.
const (
	clientNodeProxy = "client node proxy"
	serverNodeProxy = "server node proxy"
)

// The node proxy's fixed ports, ztunnel's, in its node's namespace.
const (
	nodeProxyStatsPort = 15020 // /stats/prometheus
	nodeProxyReadyPort = 15021 // /healthz/ready
	nodeProxyAdminPort = 15000 // /config_dump, on the node's localhost only
)

// The node proxy's identity and environment, as Istio deploys ztunnel.
const (
	nodeProxyNamespace = "istio-system"
	nodeProxySA        = "ztunnel"
	// altXDSHostname is a name in pilot's serving certificate: node proxies
	// reach pilot by address and check its certificate against this name.
	altXDSHostname = "istiod.istio-system.svc"
	trustDomain    = "cluster.local"
	clusterID      = "Kubernetes"
)

// nodeProxyEnvConfig is what differs between node proxies' environments.
type nodeProxyEnvConfig struct {
	node     string         // NODE_NAME
	ip       netip.Addr     // the node's address, INSTANCE_IP
	pilot    netip.AddrPort // pilot's TLS listener: ADS and the CA
	rootCert string         // absolute path of pilot's CA root (PEM)
	token    string         // absolute path of the node proxy's token
	zds      string         // absolute path of the node's ZDS socket
	workers  int            // the scenario's proxy workers
}

// nodeProxyEnv is the node proxy's whole configuration: ztunnel's
// environment variables, which meshperf-proxy --proxy-type ztunnel reads
// too, so the lab starts either binary the same way.
func nodeProxyEnv(c nodeProxyEnvConfig) []string {
	pilot := "https://" + c.pilot.String()
	return []string{
		"XDS_ADDRESS=" + pilot,
		"CA_ADDRESS=" + pilot,
		"XDS_ROOT_CA=" + c.rootCert,
		"CA_ROOT_CA=" + c.rootCert,
		"AUTH_TOKEN=" + c.token,
		"ALT_XDS_HOSTNAME=" + altXDSHostname,
		"ALT_CA_HOSTNAME=" + altXDSHostname,
		"INPOD_UDS=" + c.zds,
		"TRUST_DOMAIN=" + trustDomain,
		"CLUSTER_ID=" + clusterID,
		"NODE_NAME=" + c.node,
		"INSTANCE_IP=" + c.ip.String(),
		"POD_NAME=" + nodeProxyPodName(c.node),
		"POD_NAMESPACE=" + nodeProxyNamespace,
		"SERVICE_ACCOUNT=" + nodeProxySA,
		"ZTUNNEL_WORKER_THREADS=" + strconv.Itoa(c.workers),
		// No DNS capture: the in-pod rules leave DNS alone.
		"ISTIO_META_DNS_CAPTURE=false",
		"RUST_LOG=info",
	}
}

// nodeProxyPodName is the node proxy's pod name, as a DaemonSet's pods are
// told apart by node.
func nodeProxyPodName(node string) string { return "ztunnel-" + node }

// node is one ambient node: its namespace, its ZDS server (the lab as
// istio-cni), the pods it serves and its node proxy when one runs.
type node struct {
	name, role string
	ns         *pod.Pod // the node's own namespace
	zds        *inpod.Server
	zdsLog     *os.File
	members    []*nodeMember // the workload pods on this node
	proxy      *proc.Process
	binary     string // what runs as its node proxy: "meshperf-proxy" or "ztunnel VERSION"
}

// nodeMember is a workload pod on a node.
type nodeMember struct {
	pod      *pod.Pod
	sa       string
	enrolled bool // the pod has the in-pod rules and is known to the ZDS server
}

// workload is the member's pod as ZDS names it.
func (m *nodeMember) workload() inpod.Workload {
	return inpod.Workload{UID: inpod.PodUID(Namespace, m.pod.Name()), Name: m.pod.Name(), Namespace: Namespace,
		ServiceAccount: m.sa, NetnsPath: m.pod.NetnsPath()}
}

// addNodes creates the two nodes, each serving its members, and their ZDS
// servers, whose sockets go in a short directory of their own (a unix
// socket's path is limited to 107 bytes, which an output directory can
// exceed).
func (l *lab) addNodes(members [2][]*nodeMember) error {
	dir, err := makeRunTempDir("zds", l.cfg.RunID, 0o700)
	if err != nil {
		return fmt.Errorf("lab: ZDS socket directory: %w", err)
	}
	l.zdsDir = dir
	for _, n := range []*node{
		{name: NodeClient, role: clientNodeProxy, members: members[0]},
		{name: NodeServer, role: serverNodeProxy, members: members[1]},
	} {
		if n.ns, err = l.net.AddPod(n.name); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := l.listenZDS(n, filepath.Join(dir, n.name+".sock")); err != nil {
			return err
		}
		l.nodes = append(l.nodes, n)
	}
	return nil
}

// listenZDS starts node n's ZDS server, logging to logs/zds-NODE.log.
func (l *lab) listenZDS(n *node, socket string) error {
	f, err := os.OpenFile(filepath.Join(l.logDir, "zds-"+n.name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("lab: %s: ZDS log: %w", n.name, err)
	}
	n.zdsLog = f
	if n.zds, err = inpod.Listen(socket, slog.New(slog.NewTextHandler(f, nil))); err != nil {
		return fmt.Errorf("lab: %s: %w", n.name, err)
	}
	return nil
}

// nodeProxyCommand is what runs as node n's proxy in mode m: the real
// ztunnel in the ztunnel modes, or on the one node the interop test gives
// it, else meshperf-proxy in the role. ztunnel takes its subcommand as
// Istio's DaemonSet gives it. The path is absolute: the node proxy starts
// in a working directory of its own, where a relative one (`-proxy
// bin/meshperf-proxy`) would not be found.
func (l *lab) nodeProxyCommand(n *node, m scenario.Mode) (path string, args []string, binary string, err error) {
	path, args, binary = l.cfg.ProxyBin, []string{"--proxy-type", "ztunnel"}, "meshperf-proxy"
	if m.Ztunnel() || (l.cfg.ZtunnelBin != "" && l.cfg.ZtunnelNode == n.name) {
		zt, err := ztunnelComponent(l.cfg.ZtunnelBin)
		if err != nil {
			return "", nil, "", err
		}
		path, args, binary = l.cfg.ZtunnelBin, []string{"proxy", "ztunnel"}, zt.String()
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", nil, "", err
	}
	return path, args, binary, nil
}

// startNodeProxy starts node n's proxy in the node's namespace, as root
// (it enters the pods' namespaces and marks its sockets there), in a
// working directory of its own: ztunnel reads its token relative to it
// (./var/run/secrets/tokens/istio-token, where the lab writes the node
// proxy's: istio-system/ztunnel, bound to its pod on the node, so that the
// CA gives it the identities of that node's pods only) and a mesh config,
// of which it must find none.
func (l *lab) startNodeProxy(ctx context.Context, n *node, spec scenario.RunSpec) error {
	m, workers := spec.Mode, spec.ProxyConcurrency
	path, args, binary, err := l.nodeProxyCommand(n, m)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", n.role, err)
	}
	pilot, err := netip.ParseAddrPort(l.pilot.Addrs.SecureGRPC)
	if err != nil {
		return fmt.Errorf("lab: the control plane's TLS listener %q: %w", l.pilot.Addrs.SecureGRPC, err)
	}
	dir := filepath.Join(l.secretsDir, nodeProxyPodName(n.name))
	creds, err := IssuePodCredentials(ctx, l.pilot, l.api, dir, PodIdentity{Namespace: nodeProxyNamespace,
		Pod: nodeProxyPodName(n.name), ServiceAccount: nodeProxySA, Node: n.name}, nil)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", n.role, err)
	}
	env := nodeProxyEnv(nodeProxyEnvConfig{node: n.name, ip: n.ns.IP(), pilot: pilot, rootCert: creds.RootCert,
		token: creds.Token, zds: n.zds.Path(), workers: workers})
	p, err := n.ns.Start(proc.Spec{Name: n.role, Path: path, Args: args, Env: append(os.Environ(), env...), Dir: dir,
		StopGrace: sidecarDrain + 2*time.Second, CPULimit: spec.ProxyCPULimit,
		LogPath: filepath.Join(l.logDir, strings.ReplaceAll(n.role, " ", "-")+".log")})
	if err != nil {
		return fmt.Errorf("lab: %s: %w", n.role, err)
	}
	l.addPID(p.PID())
	n.proxy, n.binary = p, binary
	l.logf("  %s on %s: %s (pid %d)", n.role, n.name, binary, p.PID())
	return nil
}

// enroll puts node n's pods in ambient: the in-pod rules in each pod, and
// the pod handed to the node proxy over ZDS.
func (n *node) enroll() error {
	for _, m := range n.members {
		if m.enrolled {
			continue
		}
		if err := m.pod.CaptureInpod(); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := n.zds.Add(m.workload()); err != nil {
			return fmt.Errorf("lab: %s: %w", n.role, err)
		}
		m.enrolled = true
	}
	return nil
}

// leave takes node n's pods out of ambient and stops its node proxy.
func (n *node) leave() error {
	var errs []error
	for _, m := range n.members {
		if m.enrolled {
			errs = append(errs, n.zds.Del(m.workload().UID), m.pod.Uncapture())
			m.enrolled = false
		}
	}
	if n.proxy != nil {
		errs = append(errs, n.proxy.Stop())
		n.proxy = nil
	}
	return errors.Join(errs...)
}

// nodeStats talks to a node proxy's Prometheus port on its node's address.
func nodeStats(n *node) *admin {
	return newAdminAt(netip.AddrPortFrom(n.ns.IP(), nodeProxyStatsPort), nil)
}

// nodeAdmin talks to a node proxy's admin port, which listens on its
// node's localhost.
func nodeAdmin(n *node) *admin {
	return inPodAdmin(n.ns, nodeProxyAdminPort)
}

// inPodAdmin talks HTTP to a port on p's localhost: each connection is
// made from inside the pod's namespace (a socket stays in the namespace it
// was made in).
func inPodAdmin(p *pod.Pod, port uint16) *admin {
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := p.Do(func() (err error) {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return newAdminAt(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port),
		&http.Transport{DialContext: dial})
}

// waitNodeProxies waits until each node proxy says it is ready (its
// certificates, both workload-discovery types and its ZDS snapshot are in)
// and the client's node proxy knows what mode m sends it to: the server
// pod's workload, and in the waypoint modes the server Service bound to
// its waypoint (sent before that, the load would bypass the waypoint).
func (l *lab) waitNodeProxies(ctx context.Context, m scenario.Mode) error {
	return l.awaitNodeProxies(ctx, func(n *node, dump []byte) string {
		if n.role != clientNodeProxy {
			return ""
		}
		return clientNodeProxyLacks(dump, l.server.Name(), m)
	})
}

// awaitNodeProxies waits until each node proxy is ready and lacks, given
// its /config_dump, says it lacks nothing (""), every node at once.
func (l *lab) awaitNodeProxies(ctx context.Context, lacks func(n *node, dump []byte) string) error {
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	var g errgroup.Group
	for _, n := range l.nodes {
		g.Go(func() error { return awaitNodeProxy(ctx, n, lacks) })
	}
	return g.Wait()
}

// awaitNodeProxy waits for one node proxy, as awaitNodeProxies says.
func awaitNodeProxy(ctx context.Context, n *node, lacks func(n *node, dump []byte) string) error {
	ready := newAdminAt(netip.AddrPortFrom(n.ns.IP(), nodeProxyReadyPort), nil)
	for {
		if n.proxy.Exited() {
			return errors.New(n.proxy.ExitReason())
		}
		var lack string
		if code, _, err := ready.get(ctx, "/healthz/ready"); err != nil || code != http.StatusOK {
			lack = fmt.Sprintf("/healthz/ready: status %d (%v)", code, err)
		} else if code, dump, err := nodeAdmin(n).get(ctx, "/config_dump"); err != nil || code != http.StatusOK {
			lack = fmt.Sprintf("/config_dump: status %d (%v)", code, err)
		} else if lack = lacks(n, dump); lack == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: %s not ready within %s: %s (log: %s)", n.role, convergeTimeout, lack, n.proxy.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clientNodeProxyLacks says what the client's node proxy's /config_dump
// still lacks for mode m ("" when nothing). The dump is read as plain JSON,
// not as one proxy's schema, so that ztunnel's and meshperf-proxy's both
// do: the server workload's uid anywhere in it, and in the waypoint modes
// the waypoint's workload and a service object with the server's hostname
// and a waypoint. The binding alone is not enough: the node proxy sends to
// the waypoint's workload, and the control plane may send the binding
// first (its Gateway and its WorkloadEntry reach a push separately), so a
// run started then had every connection closed by the node proxy.
func clientNodeProxyLacks(dump []byte, serverPod string, m scenario.Mode) string {
	workloads := [][2]string{{"server", serverPod}}
	if m.Waypoint() {
		workloads = append(workloads, [2]string{"waypoint", WaypointPod})
	}
	for _, w := range workloads {
		if uid := inpod.PodUID(Namespace, w[1]); !strings.Contains(string(dump), strconv.Quote(uid)) {
			return "its /config_dump does not know the " + w[0] + " workload " + uid
		}
	}
	if !m.Waypoint() {
		return ""
	}
	var v any
	if err := json.Unmarshal(dump, &v); err != nil {
		return "its /config_dump is not JSON: " + err.Error()
	}
	if !hasObject(v, func(o map[string]any) bool { return o["hostname"] == ServerHost() && o["waypoint"] != nil }) {
		return "its /config_dump does not bind the service " + ServerHost() + " to a waypoint"
	}
	return ""
}

// hasObject reports whether the decoded JSON v holds, at any depth, an
// object for which match is true.
func hasObject(v any, match func(map[string]any) bool) bool {
	switch x := v.(type) {
	case map[string]any:
		if match(x) {
			return true
		}
		for _, e := range x {
			if hasObject(e, match) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasObject(e, match) {
				return true
			}
		}
	}
	return false
}
