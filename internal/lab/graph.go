package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/acmeair"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/topology"
)

// A service graph in the lab: every replica of every service of a topology
// is a pod of its own (named <service>-<i>) running `meshperf service`,
// each service a Service with a cluster IP that a hosts file names for the
// apps, and the load generator a pod of its own (the client pod) that sends
// to the entrypoint's cluster IP. The mode decides what carries the calls:
// kube-proxy's DNAT (no-mesh), a sidecar in every pod (both-sidecars), or
// the nodes' proxies with the pods spread over two nodes (ambient).

// graphLab is a graph's state: its pods and services, and what the current
// mode applied.
type graphLab struct {
	topo      *topology.Topology
	source    string // what `meshperf service -topology` reads
	entry     *graphService
	client    *pod.Pod      // the load generator's pod
	clientSC  *proc.Process // its sidecar in both-sidecars
	services  []*graphService
	pods      []*graphPod // in service order, replicas in order
	hostsFile string
	// appliedWE says the pods are registered through WorkloadEntries
	// (no-mesh and ambient), which a sidecar mode removes: a sidecar
	// registers its pod itself.
	appliedWE bool
	appliedDR bool
	setup     time.Duration // how long the current mode took to stand up
	// acmeair says the graph is the Acmeair app: its services run
	// `meshperf acmeair serve` with the key in jwtKeyFile, and its driver
	// is the load.
	acmeair    bool
	jwtKeyFile string
	// restoreNeighbours puts back the ARP table's thresholds if the graph
	// raised them; nil otherwise.
	restoreNeighbours func() error
}

// graphService is one service of the graph: its cluster IP and its pods.
type graphService struct {
	topology.Service
	vip  netip.Addr
	pods []*graphPod
}

// host is the service's cluster-local name, which the control plane knows.
func (s *graphService) host() string { return s.Name + "." + Namespace + ".svc.cluster.local" }

// graphPod is one replica: its pod, its app and, in a sidecar mode, its
// sidecar.
type graphPod struct {
	svc     *graphService
	pod     *pod.Pod
	app     *proc.Process
	sidecar *proc.Process
}

// graphVIPBase is where the graph's cluster IPs start: 10.96.1.1 for the
// first service, apart from ServerVIP (10.96.0.10).
var graphVIPBase = netip.MustParseAddr("10.96.1.0")

// maxGraphServices is how many services get a cluster IP of their own in
// 10.96.1.0/24; the pod limit is lower anyway.
const maxGraphServices = 254

// graphVIP is the i-th service's cluster IP.
func graphVIP(i int) netip.Addr {
	b := graphVIPBase.As4()
	b[3] = byte(i + 1)
	return netip.AddrFrom4(b)
}

// newGraphLab lays out the graph's services without creating anything.
func newGraphLab(t *topology.Topology, source string) (*graphLab, error) {
	if len(t.Services) > maxGraphServices {
		return nil, fmt.Errorf("lab: topology %s has %d services, more than the %d cluster IPs of 10.96.1.0/24", t.Name, len(t.Services), maxGraphServices)
	}
	entries := t.Entrypoints()
	if len(entries) == 0 {
		return nil, fmt.Errorf("lab: topology %s has no entrypoint to send the load to", t.Name)
	}
	g := &graphLab{topo: t, source: source, acmeair: t.Name == scenario.AppAcmeair && source == ""}
	for i, s := range t.Services {
		gs := &graphService{Service: s, vip: graphVIP(i)}
		g.services = append(g.services, gs)
		if s.Name == entries[0].Name {
			g.entry = gs
		}
	}
	return g, nil
}

// service returns the named service of the graph.
func (g *graphLab) service(name string) *graphService {
	for _, s := range g.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// graphOf is the graph a graph scenario runs: its topology, or the app's
// own graph.
func graphOf(s *scenario.Scenario) *topology.Topology {
	if s.App == scenario.AppAcmeair {
		return acmeair.Graph()
	}
	return s.Graph
}

// startGraph creates the client pod and one pod per replica, and writes the
// hosts file.
func (l *lab) startGraph() error {
	g, err := newGraphLab(graphOf(l.cfg.Scenario), l.cfg.Scenario.TopologySource)
	if err != nil {
		return err
	}
	l.graph = g
	if g.client, err = l.net.AddPod(ClientPod); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.client = g.client
	pods := g.topo.Pods() + 3 // the client and the ambient modes' nodes
	restore, raised, err := pod.FitNeighbourTable(pod.NeighbourEntries(pods))
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if raised {
		g.restoreNeighbours = restore
		l.logf("meshperf lab: %d pods: the kernel's ARP table thresholds (net.ipv4.neigh.default.gc_thresh2/3) raised to fit %d entries until the lab ends",
			pods, pod.NeighbourEntries(pods))
	}
	for _, s := range g.services {
		for i := range s.NumReplicas {
			p, err := l.net.AddPod(fmt.Sprintf("%s-%d", s.Name, i))
			if err != nil {
				return fmt.Errorf("lab: %w", err)
			}
			gp := &graphPod{svc: s, pod: p}
			s.pods = append(s.pods, gp)
			g.pods = append(g.pods, gp)
		}
	}
	if l.ambient() {
		if err := l.addGraphNodes(); err != nil {
			return err
		}
	}
	if g.acmeair {
		if err := l.writeJWTKey(); err != nil {
			return err
		}
	}
	g.hostsFile, err = filepath.Abs(filepath.Join(l.cfg.OutDir, "hosts"))
	if err != nil {
		return fmt.Errorf("lab: hosts file: %w", err)
	}
	if err := os.WriteFile(g.hostsFile, []byte(g.hosts()), 0o644); err != nil {
		return fmt.Errorf("lab: hosts file: %w", err)
	}
	return nil
}

// addGraphNodes puts the client pod on the first node and the graph's pods
// on the two nodes in turn, so that about half of the calls cross nodes
// over HBONE, as on a cluster of two nodes.
func (l *lab) addGraphNodes() error {
	g := l.graph
	members := [2][]*nodeMember{{{pod: g.client, sa: ClientSA}}}
	for i, gp := range g.pods {
		side := (i + 1) % 2
		members[side] = append(members[side], &nodeMember{pod: gp.pod, sa: gp.svc.Name})
	}
	return l.addNodes(members)
}

// hosts is the hosts file every app reads: each service's short and
// cluster-local names at its cluster IP, as cluster DNS answers.
func (g *graphLab) hosts() string {
	var b strings.Builder
	b.WriteString("# The lab's Services, as cluster DNS would answer for them.\n")
	for _, s := range g.services {
		fmt.Fprintf(&b, "%s %s %s\n", s.vip, s.Name, s.host())
	}
	return b.String()
}

// serviceRoutes are the graph's Services as kube-proxy programs them.
func (g *graphLab) serviceRoutes() []pod.ServiceRoute {
	var out []pod.ServiceRoute
	for _, s := range g.services {
		r := pod.ServiceRoute{VIP: s.vip, Port: topology.ServicePort}
		for _, gp := range s.pods {
			r.Endpoints = append(r.Endpoints, gp.pod.IP())
		}
		out = append(out, r)
	}
	return out
}

// startApp starts `meshperf service` for gp's service in its pod, on the
// service port of the pod's every address.
func (l *lab) startApp(ctx context.Context, gp *graphPod) error {
	g := l.graph
	name := gp.pod.Name()
	readyFile := filepath.Join(l.logDir, name+".ready")
	_ = os.Remove(readyFile)
	args := []string{"service", "-topology", g.source, "-name", gp.svc.Name}
	if g.acmeair {
		var err error
		if args, err = l.acmeairServeArgs(gp); err != nil {
			return err
		}
	}
	args = append(args, "-port", fmt.Sprint(topology.ServicePort), "-hosts", g.hostsFile, "-ready-file", readyFile)
	c, err := gp.pod.Start(proc.Spec{Name: "app " + name, Path: l.cfg.MeshperfBin, Args: args,
		LogPath: filepath.Join(l.logDir, name+".log"), ReadyFile: readyFile})
	if err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	l.addPID(c.PID())
	gp.app = c
	if _, err := c.WaitReady(ctx, startTimeout); err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	return nil
}

// appAdmin reads gp's app from inside its pod, at 127.0.0.1, which no
// capture takes to a proxy: its /metrics whatever the mode (a scrape from
// the host to the pod's address would meet the sidecar, which under STRICT
// mTLS refuses plain text), and never counted as one of the graph's calls.
func appAdmin(gp *graphPod) *admin {
	return inPodAdmin(gp.pod, topology.ServicePort)
}

// injectsErrors reports whether a service of the graph fails a share of its
// requests on purpose (isotope's errorRate).
func (g *graphLab) injectsErrors() bool {
	for _, s := range g.topo.Services {
		if s.ErrorRate > 0 {
			return true
		}
	}
	return false
}
