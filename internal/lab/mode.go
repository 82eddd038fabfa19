package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
)

// ensure makes the pods ready for spec: the same mode with everything alive
// costs nothing; otherwise the old mode's sidecars go, dead processes are
// restarted, and the new mode is set up and waited for.
func (l *lab) ensure(ctx context.Context, spec scenario.RunSpec) error {
	if l.graph != nil {
		return l.ensureGraph(ctx, spec)
	}
	if l.modeReady && l.mode == spec.Mode && l.modeAccessLog == spec.AccessLog && l.allAlive(spec.Mode) {
		return nil
	}
	l.modeReady = false
	if err := l.teardownMode(); err != nil {
		return err
	}
	if err := l.ensurePilot(ctx); err != nil {
		return err
	}
	_, serverSidecar := spec.Mode.Sidecars()
	host := ""
	if l.kind() == pod.KindLoopback {
		host = l.server.IP().String()
		if serverSidecar {
			host = "127.0.0.1"
		}
	}
	if !alive(l.serverApp) || host != l.serverAppHost {
		if l.serverApp != nil {
			if alive(l.serverApp) {
				_ = l.serverApp.Stop()
			} else {
				l.logf("  restarting the echo server: %s", l.serverApp.ExitReason())
			}
		}
		if err := l.startServerApp(ctx, host); err != nil {
			return err
		}
	}
	if err := l.setupMode(ctx, spec); err != nil {
		return err
	}
	l.mode, l.modeAccessLog, l.modeReady = spec.Mode, spec.AccessLog, true
	return nil
}

func (l *lab) allAlive(m scenario.Mode) bool {
	client, server := m.Sidecars()
	for _, n := range l.nodes {
		if alive(n.proxy) != m.NodeProxies() {
			return false
		}
	}
	return alive(l.pilot.Process) && alive(l.serverApp) &&
		client == alive(l.clientSC) && server == alive(l.serverSC) && m.Waypoint() == alive(l.waypoint)
}

// teardownMode stops the sidecars and removes their capture, takes the
// pods out of ambient, stopping the node proxies, and stops the waypoint.
// The configuration stays until setupMode applies the next mode's.
func (l *lab) teardownMode() error {
	var errs []error
	// Callers before callees: the waypoint, then the client's node, then
	// the server's, so that each connection into a pod's 15008 is closed
	// by its caller and its TIME_WAIT stays on the caller's side. Closed the
	// other way round, the server pod's port 15008 is held for a minute, and
	// a ztunnel started next in that pod cannot bind it (it sets
	// SO_REUSEPORT, not SO_REUSEADDR).
	if l.waypoint != nil {
		errs = append(errs, l.waypoint.Stop())
		l.waypoint = nil
	}
	for _, n := range l.nodes {
		errs = append(errs, n.leave())
	}
	for _, s := range []struct {
		p   **proc.Process
		pod *pod.Pod
	}{{&l.clientSC, l.client}, {&l.serverSC, l.server}} {
		if *s.p == nil {
			continue
		}
		errs = append(errs, (*s.p).Stop())
		*s.p = nil
		if l.kind() == pod.KindNetns {
			errs = append(errs, s.pod.Uncapture())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab: stop proxies: %w", err)
	}
	return nil
}

// setupMode applies the mode's configuration, starts its sidecars and waits
// until they are ready and the client side knows the server as it should.
func (l *lab) setupMode(ctx context.Context, spec scenario.RunSpec) error {
	mesh := MeshYAML(spec, l.podAddrs(), l.app)
	client, server := spec.Mode.Sidecars()
	name := string(spec.Mode)
	// A WorkloadEntry beside a registered sidecar would give the server two
	// endpoints; remove it before the sidecar comes.
	if server && l.appliedWE {
		if err := l.apply(ctx, "workloadentry-delete", workloadEntryYAML(ServerPod, l.server.IP(), ServerSA, "app: server", ""), true); err != nil {
			return err
		}
		l.appliedWE = false
	}
	if err := l.apply(ctx, name, mesh.Base, false); err != nil {
		return err
	}
	if l.appliedDR && !mesh.DestinationRule {
		if err := l.apply(ctx, "destinationrule-delete", destinationRuleYAML(), true); err != nil {
			return err
		}
	}
	l.appliedDR = mesh.DestinationRule
	// Applied again on every mode change: the ambient modes add the node
	// label to the same entry.
	if mesh.WorkloadEntry != "" {
		if err := l.apply(ctx, "workloadentry", mesh.WorkloadEntry, false); err != nil {
			return err
		}
		l.appliedWE = true
	}
	if (mesh.ClientWorkloadEntry != "") != l.appliedClientWE {
		yaml, del := mesh.ClientWorkloadEntry, l.appliedClientWE
		if del {
			yaml = workloadEntryYAML(ClientPod, l.client.IP(), ClientSA, "app: client", "")
		}
		if err := l.apply(ctx, "client-workloadentry", yaml, del); err != nil {
			return err
		}
		l.appliedClientWE = !del
	}
	if (mesh.Waypoint != "") != l.appliedWaypoint {
		yaml, del := mesh.Waypoint, l.appliedWaypoint
		if del {
			yaml = waypointYAML(l.waypointPod.IP())
		}
		if err := l.apply(ctx, "waypoint", yaml, del); err != nil {
			return err
		}
		l.appliedWaypoint = !del
	}
	if spec.Mode.NodeProxies() {
		return l.setupNodeProxies(ctx, spec)
	}
	if server {
		if err := l.startSidecar(ctx, l.serverSidecarSpec(), spec, &l.serverSC); err != nil {
			return err
		}
	}
	if client {
		if err := l.startSidecar(ctx, l.clientSidecarSpec(), spec, &l.clientSC); err != nil {
			return err
		}
	}
	return l.waitConverged(ctx, spec)
}

func (l *lab) serverSidecarSpec() sidecarSpec {
	s := sidecarSpec{role: serverSidecar, pod: l.server, sa: ServerSA, labels: "app=server"}
	if l.kind() == pod.KindLoopback {
		for _, p := range []int{l.app.HTTP, l.app.GRPC, l.app.TCP} {
			s.listen = append(s.listen, fmt.Sprintf("%s=virtualInbound:%d", netip.AddrPortFrom(l.server.IP(), uint16(p)), p))
		}
	}
	return s
}

func (l *lab) clientSidecarSpec() sidecarSpec {
	s := sidecarSpec{role: clientSidecar, pod: l.client, sa: ClientSA, labels: "app=client"}
	if l.kind() == pod.KindLoopback {
		// The client pod's address is this run's own, so its outbound
		// listeners take the Service's ports there, as capture would.
		for _, p := range []int{ServiceHTTPPort, ServiceGRPCPort, ServiceTCPPort} {
			s.listen = append(s.listen, fmt.Sprintf("%s=virtualOutbound:%d", netip.AddrPortFrom(l.client.IP(), uint16(p)), p))
		}
	}
	return s
}

// waypointSpec is the waypoint proxy: its pod (not enrolled: a waypoint
// takes HBONE itself), its identity, and the label that names its Gateway.
func (l *lab) waypointSpec() sidecarSpec {
	return sidecarSpec{role: waypointRole, waypoint: true, pod: l.waypointPod, sa: WaypointSA,
		labels: waypointGatewayLabel + "=" + WaypointGateway}
}

// podAddrs are the pods' addresses, the waypoint's when there is one.
func (l *lab) podAddrs() PodAddrs {
	a := PodAddrs{Client: l.client.IP(), Server: l.server.IP()}
	if l.waypointPod != nil {
		a.Waypoint = l.waypointPod.IP()
	}
	return a
}

// setupNodeProxies enrols each node's pod in ambient, starts the node
// proxies and, in the waypoint modes, the waypoint, and waits until they
// are ready to carry the pods' traffic.
func (l *lab) setupNodeProxies(ctx context.Context, spec scenario.RunSpec) error {
	for _, n := range l.nodes {
		if err := n.enroll(); err != nil {
			return err
		}
		if err := l.startNodeProxy(ctx, n, spec); err != nil {
			return err
		}
	}
	if spec.Mode.Waypoint() {
		if err := l.startSidecar(ctx, l.waypointSpec(), spec, &l.waypoint); err != nil {
			return err
		}
	}
	if err := l.waitNodeProxies(ctx, spec.Mode); err != nil {
		return err
	}
	return l.waitConverged(ctx, spec)
}

// startSidecar starts a sidecar in its pod: in netns mode as uid 1337
// behind Istio's capture, on loopback with its explicit listeners; with
// its pod's token, for its certificate from the CA. A waypoint is started
// the same way, without capture.
func (l *lab) startSidecar(ctx context.Context, s sidecarSpec, spec scenario.RunSpec, dst **proc.Process) error {
	var user *proc.User
	if l.kind() == pod.KindNetns && !s.waypoint {
		if err := s.pod.Capture(pod.CaptureOptions{}); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		user = &proc.User{UID: pod.DefaultProxyUID, GID: pod.DefaultProxyGID}
	}
	var err error
	if s.creds, err = l.podCredentials(ctx, s.pod.Name(), s.sa, "", user); err != nil {
		return err
	}
	// A stopped sidecar drains before it exits: SIGKILL only after that.
	sidecar := proc.Spec{Name: s.role, Path: l.cfg.ProxyBin, Args: sidecarArgs(s, l.pilot.Addrs.GRPC, spec.ProxyConcurrency, l.kind()),
		StopGrace: sidecarDrain + 2*time.Second, CPULimit: spec.ProxyCPULimit, User: user,
		LogPath: filepath.Join(l.logDir, strings.ReplaceAll(s.role, " ", "-")+".log")}
	c, err := s.pod.Start(sidecar)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", s.role, err)
	}
	l.addPID(c.PID())
	*dst = c
	return nil
}

// waitConverged waits until each sidecar (and the waypoint) is ready, has
// its access log set as the run wants, and has the configuration the run
// depends on.
func (l *lab) waitConverged(ctx context.Context, spec scenario.RunSpec) error {
	var sides []convergeSide
	if l.serverSC != nil {
		sides = append(sides, convergeSide{l.serverSC, newAdmin(l.server.IP()), func(d *configDump) string {
			return serverConverged(d, spec, l.app.ForProtocol(spec.Protocol))
		}})
	}
	if l.clientSC != nil {
		want := netip.AddrPortFrom(l.server.IP(), uint16(l.app.ForProtocol(spec.Protocol)))
		sides = append(sides, convergeSide{l.clientSC, newAdmin(l.client.IP()), func(d *configDump) string {
			return clientConverged(d, spec, want)
		}})
	}
	if l.waypoint != nil {
		want := netip.AddrPortFrom(l.server.IP(), uint16(l.app.ForProtocol(spec.Protocol)))
		sides = append(sides, convergeSide{l.waypoint, newAdmin(l.waypointPod.IP()), func(d *configDump) string {
			return waypointConverged(d, spec, want)
		}})
	}
	return awaitConverged(ctx, sides, spec.AccessLog)
}

// convergeSide is one proxy to wait for: its process, its admin API, and
// what its /config_dump still lacks ("" when nothing).
type convergeSide struct {
	p     *proc.Process
	admin *admin
	check func(*configDump) string
}

// convergeParallel bounds how many proxies are polled at once: enough
// that a hundred sidecars converge in seconds, few enough that polling
// does not starve them of the CPU they need to take their configuration.
const convergeParallel = 16

// awaitConverged waits until every side is ready and configured, then
// sets its access log, several sides at a time.
func awaitConverged(ctx context.Context, sides []convergeSide, accessLog bool) error {
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(convergeParallel)
	for _, s := range sides {
		g.Go(func() error { return s.await(ctx, accessLog) })
	}
	return g.Wait()
}

func (s convergeSide) await(ctx context.Context, accessLog bool) error {
	lack := "not ready"
	for lack != "" {
		if s.p.Exited() {
			return errors.New(s.p.ExitReason())
		}
		if s.admin.ready(ctx) {
			if d, err := s.admin.configDump(ctx); err != nil {
				lack = err.Error()
			} else {
				lack = s.check(d)
			}
		}
		if lack == "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: %s not configured within %s: %s (log: %s)", s.p.Name(), convergeTimeout, lack, s.p.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := s.admin.setAccessLog(ctx, accessLog); err != nil {
		return fmt.Errorf("lab: %s: %w", s.p.Name(), err)
	}
	return nil
}
