package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// convergeTimeout bounds the wait for sidecars to be ready and configured.
const convergeTimeout = 30 * time.Second

// lab is one invocation's state: the network, the pods and what runs in
// them, and which mode they are set up for.
type lab struct {
	cfg    Config
	logDir string
	net    pod.Network

	client, server *pod.Pod
	pilotIP        netip.Addr
	pilotGRPC      string
	pilotHTTP      string
	pilotMon       string
	app            AppPorts // the echo server's ports (the Service's targetPorts)
	outbound       AppPorts // loopback only: the client sidecar's explicit listener ports

	pilot, serverApp     *watched
	clientSC, serverSC   *watched
	serverAppHost        string // loopback: the address the echo server listens on
	mode                 scenario.Mode
	modeAccessLog        bool
	modeReady            bool
	appliedWE, appliedDR bool
	pids                 []int
}

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
func (l *lab) start() error {
	n, err := pod.New(pod.Options{Kind: l.cfg.Network, RunID: l.cfg.RunID})
	if err != nil {
		return fmt.Errorf("lab: pod network: %w", err)
	}
	l.net = n
	if n.Kind() == pod.KindLoopback {
		l.logf("meshperf lab: loopback network (not root, or -network loopback): pods are 127.x addresses and " +
			"sidecars use explicit listeners instead of iptables capture; every result says network=loopback")
	}
	if l.client, err = n.AddPod("client"); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if l.server, err = n.AddPod("server"); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := l.choosePorts(); err != nil {
		return err
	}
	if err := l.startPilot(); err != nil {
		return err
	}
	return nil
}

// choosePorts picks the control plane's address and the app's ports. In
// netns mode the control plane listens on the bridge's address, which is
// this run's own, and each pod has its own ports; on loopback the control
// plane gets a pod address of its own and the app's ports must be free on
// the host, since all pods share it.
func (l *lab) choosePorts() error {
	if l.net.Kind() == pod.KindNetns {
		l.pilotIP = l.net.Gateway()
		l.app = AppPorts{ServiceHTTPPort, ServiceGRPCPort, ServiceTCPPort}
	} else {
		p, err := l.net.AddPod("istiod")
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		l.pilotIP = p.IP()
		ports, err := freePorts(netip.IPv4Unspecified(), 6)
		if err != nil {
			return err
		}
		l.app = AppPorts{ports[0], ports[1], ports[2]}
		l.outbound = AppPorts{ports[3], ports[4], ports[5]}
	}
	ports, err := freePorts(l.pilotIP, 3)
	if err != nil {
		return err
	}
	hp := func(p int) string { return netip.AddrPortFrom(l.pilotIP, uint16(p)).String() }
	l.pilotGRPC, l.pilotHTTP, l.pilotMon = hp(ports[0]), hp(ports[1]), hp(ports[2])
	return nil
}

// freePorts returns n ports free on ip right now. Holding all the
// listeners until the end keeps the n distinct.
func freePorts(ip netip.Addr, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			return nil, fmt.Errorf("lab: find a free port on %s: %w", ip, err)
		}
		ls = append(ls, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startPilot starts `meshperf pilot` on the host, its store under the
// output directory, and waits until its API answers.
func (l *lab) startPilot() error {
	args := []string{"pilot", "--dataDir", filepath.Join(l.cfg.OutDir, "pilot-data"),
		"--grpcAddr", l.pilotGRPC, "--httpAddr", l.pilotHTTP, "--monitoringAddr", l.pilotMon}
	log := filepath.Join(l.logDir, "pilot.log")
	c, err := startHost(l.cfg.MeshperfBin, args, log)
	if err != nil {
		return fmt.Errorf("lab: control plane: %w", err)
	}
	l.pids = append(l.pids, c.PID())
	l.pilot = &watched{role: "control plane", proc: c, log: log}
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", l.pilotHTTP, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if !l.pilot.alive() {
			return fmt.Errorf("lab: %s", l.pilot.exitReason())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: control plane did not listen on %s within 20s (log: %s)", l.pilotHTTP, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apply sends YAML to the control plane, through `meshperf apply`.
func (l *lab) apply(name, yaml string, del bool) error {
	path := filepath.Join(l.cfg.OutDir, "mesh", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	verb := "apply"
	if del {
		verb = "delete"
	}
	if err := runTool(l.cfg.MeshperfBin, verb, "-f", path, "-s", l.pilotHTTP); err != nil {
		return fmt.Errorf("lab: %s %s: %w", verb, name, err)
	}
	return nil
}

// startServerApp starts the echo server in the server pod. On loopback it
// listens on the pod's address without a server sidecar and on 127.0.0.1
// behind one, where the sidecar's inbound clusters forward.
func (l *lab) startServerApp(host string) error {
	hp := func(p int) string {
		if host == "" {
			return strconv.Itoa(p)
		}
		return net.JoinHostPort(host, strconv.Itoa(p))
	}
	log := filepath.Join(l.logDir, "server-app.log")
	c := l.server.Command(l.cfg.MeshperfBin, "server", "-http-port", hp(l.app.HTTP),
		"-grpc-port", hp(l.app.GRPC), "-tcp-port", hp(l.app.TCP))
	c.LogPath = log
	if err := c.Start(); err != nil {
		return fmt.Errorf("lab: echo server: %w", err)
	}
	l.pids = append(l.pids, c.PID())
	l.serverApp = &watched{role: "echo server", proc: c, log: log}
	l.serverAppHost = host
	addr := net.JoinHostPort(host, strconv.Itoa(l.app.HTTP))
	if host == "" {
		addr = netip.AddrPortFrom(l.server.IP(), uint16(l.app.HTTP)).String()
	}
	return waitListening(addr, l.serverApp, 10*time.Second)
}

// waitListening waits until addr accepts connections, or w exits.
func waitListening(addr string, w *watched, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if !w.alive() {
			return errors.New(w.exitReason())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within %s (log: %s)", w.role, addr, limit, w.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close stops everything and removes the pods.
func (l *lab) close() error {
	var errs []error
	for _, w := range []*watched{l.clientSC, l.serverSC, l.serverApp, l.pilot} {
		if w != nil && w.proc != nil {
			errs = append(errs, w.proc.Stop())
		}
	}
	if l.net != nil {
		errs = append(errs, l.net.Close())
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
