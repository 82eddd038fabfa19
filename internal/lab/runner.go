package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/proc"
)

// convergeTimeout bounds the wait for sidecars to be ready and configured.
const convergeTimeout = 30 * time.Second

// lab is one invocation's state: the network, the pods and what runs in
// them, and which mode they are set up for.
type lab struct {
	cfg    Config
	logDir string
	net    pod.Network
	prov   labProvenance // what each run records about itself
	// loadDashboardURL is where the load generators publish: the
	// dashboard, or the relay to it; "" publishes nothing.
	loadDashboardURL string

	client, server *pod.Pod
	pilotIP        netip.Addr  // where the control plane listens
	pilot          *proc.Pilot // on the host
	api            *api.Client // the control plane's config API
	app            AppPorts    // the echo server's ports (the Service's targetPorts)

	serverApp          *proc.Process
	clientSC, serverSC *proc.Process
	nodes              []*node       // the ambient modes' nodes, the client's first; none without an ambient mode
	waypointPod        *pod.Pod      // the waypoint's pod; nil without a waypoint mode
	waypoint           *proc.Process // the waypoint proxy, while a waypoint mode is set up
	zdsDir             string        // where the nodes' ZDS sockets are
	secretsDir         string        // the pods' tokens and the mesh root, and the node proxies' working directories
	serverAppHost      string        // loopback: the address the echo server listens on
	mode               scenario.Mode
	modeAccessLog      bool
	modeReady          bool
	appliedWE          bool
	appliedClientWE    bool
	appliedDR          bool
	appliedWaypoint    bool
	prom               *metrics.PromServer // --prometheus
	// graph is the service graph of a scenario with a topology, which
	// replaces the server pod; nil for the two-pod benchmark.
	graph  *graphLab
	pidsMu sync.Mutex // pids grows from goroutines setting a graph up
	pids   []int
}

// addPID records a process the lab started.
func (l *lab) addPID(pid int) {
	l.pidsMu.Lock()
	defer l.pidsMu.Unlock()
	l.pids = append(l.pids, pid)
}

// alive reports whether p was started and has not exited.
func alive(p *proc.Process) bool { return p != nil && !p.Exited() }

func (l *lab) kind() pod.Kind {
	if l.net == nil {
		return l.cfg.Network
	}
	return l.net.Kind()
}

func (l *lab) namePrefix() string {
	if l.net == nil {
		return ""
	}
	return l.net.NamePrefix()
}

func (l *lab) logf(format string, args ...any) {
	fmt.Fprintf(l.cfg.Out, format+"\n", args...)
}

// start creates the network and pods and starts the control plane.
func (l *lab) start(ctx context.Context) error {
	n, err := pod.New(pod.Options{Kind: l.cfg.Network, RunID: l.cfg.RunID})
	if err != nil {
		return fmt.Errorf("lab: pod network: %w", err)
	}
	l.net = n
	if err := l.makeSecretsDir(); err != nil {
		return err
	}
	if n.Kind() == pod.KindLoopback {
		l.logf("meshperf lab: loopback network (not root, or -network loopback): pods are 127.x addresses and " +
			"sidecars use explicit listeners instead of iptables capture; every result says network=loopback")
	}
	if l.cfg.Scenario.IsGraph() {
		if err := l.startGraph(); err != nil {
			return err
		}
		if err := l.choosePilotIP(); err != nil {
			return err
		}
		return l.startPilot(ctx)
	}
	if l.client, err = n.AddPod(ClientPod); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if l.server, err = n.AddPod(ServerPod); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if l.ambient() {
		if err := l.addNodes([2][]*nodeMember{{{pod: l.client, sa: ClientSA}}, {{pod: l.server, sa: ServerSA}}}); err != nil {
			return err
		}
	}
	if l.hasWaypoint() {
		// A pod of its own, as the waypoint's Deployment gives it; on no
		// node's proxy's list (it is not enrolled), as Istio leaves
		// waypoints out of ztunnel's in-pod capture.
		if l.waypointPod, err = n.AddPod(WaypointPod); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	if err := l.choosePilotIP(); err != nil {
		return err
	}
	return l.startPilot(ctx)
}

// choosePilotIP picks the control plane's address, which is this run's
// own: in netns mode the bridge's, on loopback a pod address of its own.
// Nothing is picked in advance: pilot binds port 0 there and says which
// ports it got in its ready file; a restart takes the same ports again.
func (l *lab) choosePilotIP() error {
	if l.net.Kind() == pod.KindNetns {
		l.pilotIP = l.net.Gateway()
		return nil
	}
	p, err := l.net.AddPod("istiod")
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.pilotIP = p.IP()
	return nil
}

// ambient reports whether the scenario has an ambient mode, which needs
// nodes.
func (l *lab) ambient() bool {
	for _, m := range l.cfg.Scenario.Modes {
		if m.NodeProxies() {
			return true
		}
	}
	return false
}

// hasWaypoint reports whether the scenario has a waypoint mode, which
// needs the waypoint's pod.
func (l *lab) hasWaypoint() bool {
	for _, m := range l.cfg.Scenario.Modes {
		if m.Waypoint() {
			return true
		}
	}
	return false
}

// startTimeout bounds the wait for a process the lab starts to be ready.
const startTimeout = 20 * time.Second

// startPilot starts `meshperf pilot` on the host, its store under the
// output directory, or restarts it on the addresses it had, where the
// sidecars look for it.
func (l *lab) startPilot(ctx context.Context) error {
	var (
		p   *proc.Pilot
		err error
	)
	if l.pilot == nil {
		// The TLS listener is where every proxy gets its certificate.
		p, err = proc.StartPilot(ctx, proc.PilotOptions{Command: []string{l.cfg.MeshperfBin, "pilot"}, Host: l.pilotIP, Secure: true,
			DataDir: filepath.Join(l.cfg.OutDir, "pilot-data"), LogPath: filepath.Join(l.logDir, "pilot.log")}, startTimeout)
	} else {
		p, err = l.pilot.Restart(ctx, startTimeout)
	}
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.pilot = p
	l.pids = append(l.pids, p.PID())
	if l.api, err = p.APIClient(); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// ensurePilot restarts the control plane if it died.
func (l *lab) ensurePilot(ctx context.Context) error {
	if alive(l.pilot.Process) {
		return nil
	}
	l.logf("  restarting the control plane: %s", l.pilot.ExitReason())
	return l.startPilot(ctx)
}

// apply sends YAML to the control plane's API, or deletes what it names.
func (l *lab) apply(ctx context.Context, name, yaml string, del bool) error {
	verb, source := "apply", name+".yaml"
	var err error
	if del {
		verb = "delete"
		_, err = l.api.Delete(ctx, source, []byte(yaml))
	} else {
		_, err = l.api.Apply(ctx, source, []byte(yaml))
	}
	if err != nil {
		return fmt.Errorf("lab: %s %s: %w", verb, name, err)
	}
	return nil
}

// startServerApp starts the echo server in the server pod. In netns mode it
// listens on the Service's ports, as each pod has its own. On loopback,
// where pods share the host's ports, it binds port 0 and its ready file
// says which ports it got, which become the Service's targetPorts: on the
// pod's address without a server sidecar, on 127.0.0.1 behind one, where
// the sidecar's inbound clusters forward (the sidecar then listens on the
// same ports at the pod's address).
func (l *lab) startServerApp(ctx context.Context, host string) error {
	ports := []string{strconv.Itoa(ServiceHTTPPort), strconv.Itoa(ServiceGRPCPort), strconv.Itoa(ServiceTCPPort)}
	if l.kind() == pod.KindLoopback {
		port0 := net.JoinHostPort(host, "0")
		ports = []string{port0, port0, port0}
	}
	readyFile := filepath.Join(l.logDir, "server-app.ready")
	c, err := l.server.Start(proc.Spec{Name: "echo server", Path: l.cfg.MeshperfBin,
		Args:    []string{"server", "-http-port", ports[0], "-grpc-port", ports[1], "-tcp-port", ports[2], "-ready-file", readyFile},
		LogPath: filepath.Join(l.logDir, "server-app.log"), ReadyFile: readyFile})
	if err != nil {
		return fmt.Errorf("lab: echo server: %w", err)
	}
	l.pids = append(l.pids, c.PID())
	l.serverApp, l.serverAppHost = c, host
	r, err := c.WaitReady(ctx, startTimeout)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	var app AppPorts
	for _, lp := range []struct {
		name string
		dst  *int
	}{{"http", &app.HTTP}, {"grpc", &app.GRPC}, {"tcp", &app.TCP}} {
		addr, err := r.Listener(lp.name)
		if err == nil {
			var ap netip.AddrPort
			if ap, err = netip.ParseAddrPort(addr); err == nil {
				*lp.dst = int(ap.Port())
			}
		}
		if err != nil {
			return fmt.Errorf("lab: echo server: %w", err)
		}
	}
	l.app = app
	return nil
}

// close stops everything and removes the pods.
func (l *lab) close() error {
	var errs []error
	// Prometheus first, so that it does not log the proxies' going as
	// failed scrapes.
	l.prom.Stop()
	for _, p := range []*proc.Process{l.clientSC, l.serverSC, l.waypoint, l.serverApp} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	for _, n := range l.nodes {
		if n.proxy != nil {
			errs = append(errs, n.proxy.Stop())
		}
		if n.zds != nil {
			errs = append(errs, n.zds.Close())
		}
		if n.zdsLog != nil {
			errs = append(errs, n.zdsLog.Close())
		}
	}
	if l.zdsDir != "" {
		errs = append(errs, os.RemoveAll(l.zdsDir))
	}
	if l.secretsDir != "" {
		errs = append(errs, os.RemoveAll(l.secretsDir))
	}
	if l.pilot != nil {
		errs = append(errs, l.pilot.Stop())
	}
	if l.net != nil {
		errs = append(errs, l.net.Close())
	}
	if l.graph != nil && l.graph.restoreNeighbours != nil {
		errs = append(errs, l.graph.restoreNeighbours())
	}
	return errors.Join(errs...)
}

func (l *lab) keepNotice() {
	var pids []string
	for _, p := range l.pids {
		pids = append(pids, strconv.Itoa(p))
	}
	l.logf("meshperf lab: -keep: pods and processes left up (pids %s); logs in %s", strings.Join(pids, " "), l.logDir)
	if l.kind() == pod.KindNetns {
		l.logf("  remove them with: meshperf lab clean (or kill the pids; the control plane runs on the host)")
	} else {
		l.logf("  remove them with: kill %s", strings.Join(pids, " "))
	}
}
