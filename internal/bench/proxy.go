package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
)

// ProxyScenario is the scenario name bench proxy stores its runs under.
const ProxyScenario = "bench-proxy"

// ProxyConfig is what `meshperf bench proxy` measures and with what.
type ProxyConfig struct {
	MeshperfBin string // runs pilot, the echo server and the load
	ProxyBin    string // meshperf-proxy
	HAProxyBin  string
	// PerfBin counts syscalls (perf stat -e raw_syscalls:sys_enter); ""
	// leaves them unknown.
	PerfBin string
	Repeats int
	// Duration is each measured run's load; Warmup the load before it at
	// the same rate, left out of every figure.
	Duration, Warmup time.Duration
	QPS              []int // 0: as fast as possible
	Connections      int
	Size             int // response body, bytes
	Protocols        []scenario.Protocol
	Cases            []string // CasePlaintext, CaseMTLS
	// Threads is both proxies' worker threads: HAProxy's nbthread,
	// meshperf-proxy's --concurrency.
	Threads int
	OutDir  string // logs, configurations, certificates, the load's JSON
	RunID   string
	Labels  string
	// Store receives every run as it ends; nil stores nothing.
	Store func(results.Run) error
	// Progress receives a line per run; nil is quiet.
	Progress io.Writer
}

// proxyBench is one invocation's state: the pods, pilot, the echo server
// and what every run records.
type proxyBench struct {
	cfg            ProxyConfig
	net            pod.Network
	pods           meshPods
	pilot          *proc.Pilot
	api            *api.Client
	echo           *proc.Process
	app            lab.AppPorts
	certs          haproxyCerts
	proxyVersion   results.Component
	haproxyVersion results.Component
	prov           results.Provenance // DataPlane and ControlPlane set per subject
	runs           []results.Run
}

// RunProxy runs the benchmark: for each case and protocol, each subject
// set up side by side, then for each rate cfg.Repeats rounds with every
// subject once per round in a rotating order (Interleave). Every run is
// stored as it ends; the report has each case's medians and ratios.
func RunProxy(ctx context.Context, cfg ProxyConfig) (*ProxyReport, error) {
	b := &proxyBench{cfg: cfg}
	defer b.close()
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	report := &ProxyReport{Bench: "proxy", RunID: cfg.RunID, Machine: results.LocalMachine(), Meshperf: results.ThisBuild(),
		MeshperfProxy: b.proxyVersion, HAProxy: b.haproxyVersion, Threads: cfg.Threads, Repeats: cfg.Repeats,
		Duration: cfg.Duration.String()}
	if cfg.PerfBin == "" {
		report.Notes = append(report.Notes, "syscalls per request unknown: perf is not installed (apt-get install linux-perf)")
	}
	for _, c := range cfg.Cases {
		for _, p := range cfg.Protocols {
			cases, err := b.runCase(ctx, c, p)
			report.Cases = append(report.Cases, cases...)
			if err != nil {
				return report, err
			}
		}
	}
	if !report.allocationsKnown() {
		report.Notes = append(report.Notes, "allocations per request unknown: this meshperf-proxy does not count them (meshperf_proxy_allocations_total)")
	}
	report.Runs = b.runs
	return report, nil
}

// start creates the loopback pods, opens the CA (so that HAProxy's
// certificates come from the root pilot then loads), starts pilot and the
// echo server, and asks both proxies their versions.
func (b *proxyBench) start(ctx context.Context) error {
	var err error
	if b.proxyVersion, err = lab.ProxyComponent(b.cfg.ProxyBin); err != nil {
		return err
	}
	if b.haproxyVersion, err = haproxyVersion(ctx, b.cfg.HAProxyBin); err != nil {
		return err
	}
	hash, err := results.ParamsHash(b.params())
	if err != nil {
		return err
	}
	b.prov = results.Provenance{Meshperf: results.ThisBuild(), ParamsHash: hash, Labels: b.cfg.Labels, Machine: results.LocalMachine()}
	if b.net, err = pod.New(pod.Options{Kind: pod.KindLoopback, RunID: b.cfg.RunID}); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	for _, p := range []struct {
		name string
		dst  **pod.Pod
	}{{lab.ClientPod, &b.pods.client}, {lab.ServerPod, &b.pods.server}, {"haproxy-client", &b.pods.hClient},
		{"haproxy-server", &b.pods.hServer}, {"istiod", &b.pods.pilot}} {
		if *p.dst, err = b.net.AddPod(p.name); err != nil {
			return fmt.Errorf("pods: %w", err)
		}
	}
	dataDir := filepath.Join(b.cfg.OutDir, "pilot-data")
	if b.certs, err = issueHAProxyCerts(dataDir, b.cfg.OutDir); err != nil {
		return err
	}
	// The TLS listener is the CA, where the sidecars get their
	// certificates with their pods' tokens, as in the lab.
	if b.pilot, err = proc.StartPilot(ctx, proc.PilotOptions{Command: []string{b.cfg.MeshperfBin, "pilot"}, Host: b.pods.pilot.IP(),
		Secure: true, DataDir: dataDir, LogPath: filepath.Join(b.cfg.OutDir, "pilot.log")}, 20*time.Second); err != nil {
		return err
	}
	if b.api, err = b.pilot.APIClient(); err != nil {
		return err
	}
	return b.startEcho(ctx)
}

// startEcho starts the echo server on 127.0.0.1, port 0, as the lab does
// behind a server sidecar: its ports become the Service's targetPorts.
func (b *proxyBench) startEcho(ctx context.Context) error {
	port0 := net.JoinHostPort("127.0.0.1", "0")
	ready := filepath.Join(b.cfg.OutDir, "server-app.ready")
	c, err := proc.Start(proc.Spec{Name: "echo server", Path: b.cfg.MeshperfBin,
		Args:    []string{"server", "-http-port", port0, "-grpc-port", port0, "-tcp-port", port0, "-ready-file", ready},
		LogPath: filepath.Join(b.cfg.OutDir, "server-app.log"), ReadyFile: ready})
	if err != nil {
		return fmt.Errorf("echo server: %w", err)
	}
	b.echo = c
	r, err := c.WaitReady(ctx, 20*time.Second)
	if err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		dst  *int
	}{{"http", &b.app.HTTP}, {"grpc", &b.app.GRPC}, {"tcp", &b.app.TCP}} {
		addr, err := r.Listener(l.name)
		if err != nil {
			return fmt.Errorf("echo server: %w", err)
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return fmt.Errorf("echo server: %w", err)
		}
		*l.dst = int(ap.Port())
	}
	return nil
}

func (b *proxyBench) close() {
	if b.echo != nil {
		_ = b.echo.Stop()
	}
	if b.pilot != nil {
		_ = b.pilot.Stop()
	}
	if b.net != nil {
		_ = b.net.Close()
	}
}

// params are what defines the measurement, for its parameters hash.
func (b *proxyBench) params() any {
	c := b.cfg
	return struct {
		Duration, Warmup string
		QPS              []int
		Connections      int
		Size             int
		Threads          int
	}{c.Duration.String(), c.Warmup.String(), c.QPS, c.Connections, c.Size, c.Threads}
}

// runCase sets every subject up for one case and protocol and measures
// each rate; the subjects stay up across rates and stop at the end.
func (b *proxyBench) runCase(ctx context.Context, caseName string, p scenario.Protocol) ([]ProxyCase, error) {
	noProxy := &subject{name: SubjectNoProxy, mode: results.ModeNoMesh,
		target: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(b.app.HTTP))}
	subjects := []*subject{noProxy}
	defer func() {
		for _, s := range subjects {
			_ = s.stop()
		}
	}()
	ours, err := b.startMeshperf(ctx, caseName, p)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", caseName, p, err)
	}
	subjects = append(subjects, ours)
	peer, err := b.startHAProxy(ctx, caseName, p)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", caseName, p, err)
	}
	subjects = append(subjects, peer)
	byName := map[string]*subject{}
	var names []string
	for _, s := range subjects {
		byName[s.name] = s
		names = append(names, s.name)
	}
	var out []ProxyCase
	for _, qps := range b.cfg.QPS {
		pc := newProxyCase(caseName, p, qps, b.cfg)
		err := Interleave(ctx, b.cfg.Repeats, names, func(ctx context.Context, round int, name string) error {
			r, m, err := b.measure(ctx, byName[name], caseName, p, qps, round)
			if err != nil {
				return fmt.Errorf("%s %s %s qps, round %d: %w", caseName, p, qpsWord(qps), round, err)
			}
			b.runs = append(b.runs, r)
			if b.cfg.Store != nil {
				if err := b.cfg.Store(r); err != nil {
					return err
				}
			}
			pc.add(name, round, m)
			b.progress("  %s %s %s qps, round %d/%d: %-15s %s", caseName, p, qpsWord(qps), round, b.cfg.Repeats, name, m.line())
			return nil
		})
		if err != nil {
			return out, err
		}
		out = append(out, pc.finish())
	}
	return out, nil
}

func (b *proxyBench) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		_, _ = fmt.Fprintf(b.cfg.Progress, format+"\n", args...)
	}
}

func qpsWord(qps int) string {
	if qps == 0 {
		return "max"
	}
	return strconv.Itoa(qps)
}
