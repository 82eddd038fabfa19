package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
	"github.com/meshperf/meshperf/internal/results"
)

// maxSetupFailures is how many modes in a row may fail to come up before
// the lab gives up on the rest of the matrix.
const maxSetupFailures = 2

// runMatrix runs every spec in order, setting up each mode when it changes,
// and stores each run as it ends.
func (l *lab) runMatrix(ctx context.Context, store *results.Store) []Outcome {
	return Matrix{
		Specs: l.cfg.Scenario.Expand(), RunID: l.cfg.RunID, Store: store,
		Progress: l.cfg.Progress, ProgressTTY: l.cfg.ProgressTTY, Live: l.cfg.Live, Logf: l.logf,
		Ensure: l.ensure, RunOne: l.runOne, Failed: l.failed,
		RunDone: func(spec scenario.RunSpec) {
			if l.cfg.hook != nil {
				l.cfg.hook("run-done", l, spec)
			}
		},
	}.Run(ctx)
}

// Matrix is the loop over a scenario's runs that every lab shares, here
// and on a cluster: a mode is set up when it changes, a run's outcome is
// shown and stored as it ends, and the loop gives up after
// maxSetupFailures modes in a row that did not come up.
type Matrix struct {
	Specs       []scenario.RunSpec
	RunID       string
	Store       *results.Store // nil stores nothing
	Progress    io.Writer
	ProgressTTY bool
	Live        LivePublisher
	Logf        func(format string, args ...any)
	// Ensure sets up spec's mode; RunOne runs spec in it; Failed is the
	// outcome of a spec that failed for reason before its run.
	Ensure func(context.Context, scenario.RunSpec) error
	RunOne func(context.Context, scenario.RunSpec) Outcome
	Failed func(spec scenario.RunSpec, reason string) Outcome
	// RunDone, when set, is called after each run.
	RunDone func(scenario.RunSpec)
}

// Run runs the matrix until its end or ctx's.
func (m Matrix) Run(ctx context.Context) []Outcome {
	prog := newProgress(m.Progress, m.ProgressTTY, m.Specs, m.Live, m.RunID)
	var outs []Outcome
	setupFailures := 0
	for i, spec := range m.Specs {
		if ctx.Err() != nil {
			break
		}
		prog.start(i)
		var o Outcome
		if setupFailures >= maxSetupFailures {
			o = m.Failed(spec, "not run: the lab could not recover after earlier failures")
		} else if err := m.Ensure(ctx, spec); err != nil {
			setupFailures++
			o = m.Failed(spec, "set up "+string(spec.Mode)+": "+err.Error())
		} else {
			setupFailures = 0
			o = m.RunOne(ctx, spec)
		}
		prog.done(o)
		outs = append(outs, o)
		if m.RunDone != nil {
			m.RunDone(spec)
		}
		if m.Store != nil {
			if err := m.Store.Insert(o.Run); err != nil {
				m.Logf("meshperf lab: %v", err)
			}
		}
		if i < len(m.Specs)-1 && !o.Run.Failed {
			sleepCtx(ctx, spec.Cooldown)
		}
	}
	prog.finish()
	return outs
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// base fills the fields every run has, whatever happened to it.
func (l *lab) base(spec scenario.RunSpec) results.Run {
	return BaseRun(spec, l.cfg.RunID, l.kind(), l.prov.forMode(spec.Mode))
}

// BaseRun is the record of spec in invocation runID on network, before
// anything is measured: the fields every run has, whatever happened to it.
func BaseRun(spec scenario.RunSpec, runID string, network pod.Kind, prov results.Provenance) results.Run {
	return results.Run{
		RunID: runID, Label: spec.Label(runID), Scenario: spec.Scenario,
		Mode: string(spec.Mode), Protocol: string(spec.Protocol), Repetition: spec.Repetition,
		Connections: spec.Connections, RequestedQPS: spec.QPS, PayloadSize: spec.PayloadSize,
		MTLS: spec.MTLS, Network: string(network), StartTime: time.Now(), Provenance: prov,
		Latency: results.Latency{Min: math.NaN(), Max: math.NaN(), Avg: math.NaN(), P50: math.NaN(),
			P75: math.NaN(), P90: math.NaN(), P99: math.NaN(), P999: math.NaN(), P9999: math.NaN()},
		SendDelayP99: math.NaN(),
	}
}

func (l *lab) failed(spec scenario.RunSpec, reason string) Outcome {
	r := l.base(spec)
	r.Failed, r.FailureReason = true, reason
	return Outcome{Run: r}
}

// JSONName is the run's result file: its Istio label, with the repetition
// after the first so repetitions do not overwrite each other.
func JSONName(spec scenario.RunSpec, label string) string {
	if spec.Repetition > 1 {
		label += "_rep" + strconv.Itoa(spec.Repetition)
	}
	return label + ".json"
}

// target is where the load generator sends: the server pod's app port, or on
// loopback with a client sidecar, that sidecar's explicit listener (in netns
// mode capture takes the same connection to the sidecar), or in the
// waypoint modes the Service's VIP and port.
func (l *lab) target(spec scenario.RunSpec) (args []string) {
	addr := netip.AddrPortFrom(l.server.IP(), uint16(l.app.ForProtocol(spec.Protocol)))
	switch client, _ := spec.Mode.Sidecars(); {
	case client && l.kind() == pod.KindLoopback:
		addr = netip.AddrPortFrom(l.client.IP(), uint16(servicePort(spec.Protocol)))
	case spec.Mode.Waypoint():
		// A waypoint for services serves what is sent to the service.
		addr = netip.AddrPortFrom(ServerVIP, uint16(servicePort(spec.Protocol)))
	}
	// The client sidecar routes HTTP and gRPC by Host (gRPC's :authority),
	// as for a call to the Service.
	host := []string{"-H", "Host: " + ServerHost()}
	switch spec.Protocol {
	case scenario.TCP:
		return []string{"tcp://" + addr.String()}
	case scenario.GRPC:
		return append(host, addr.String())
	}
	return append(host, "http://"+addr.String()+spec.EchoPath())
}

// runOne runs the load generator in the client pod, sampling every
// process over the steady window, and checks the sidecars' counters.
func (l *lab) runOne(ctx context.Context, spec scenario.RunSpec) Outcome {
	if l.graph != nil {
		return l.runGraphOne(ctx, spec)
	}
	r := l.base(spec)
	before, err := l.scrape(ctx)
	if err != nil {
		return l.failed(spec, err.Error())
	}
	var watched []watchedProcess
	for _, p := range l.infra() {
		watched = append(watched, watchedProcess{roleOf(p), p})
	}
	jsonPath := filepath.Join(l.cfg.OutDir, JSONName(spec, r.Label))
	args, env, err := l.loadCommand(spec, r, jsonPath, l.target(spec))
	if err != nil {
		return l.failed(spec, err.Error())
	}
	r, winStart, winEnd, reason := l.runLoad(ctx, spec, r, watched, results.RoleClientApp, args, env, jsonPath)
	if reason != "" {
		return l.failed(spec, reason)
	}
	after, err := l.scrape(ctx)
	if err != nil {
		r.Failed, r.FailureReason = true, err.Error()
		return Outcome{Run: r}
	}
	if l.prom != nil && !winStart.IsZero() {
		if r.Prometheus, err = l.promFigures(ctx, r.Processes, winStart, winEnd); err != nil {
			l.logf("meshperf lab: --prometheus: %s: %v", r.Label, err)
		}
	}
	checks := TrafficChecks(spec, r.Calls, before, after, LabIdentities())
	for _, c := range checks {
		if !c.OK && !r.Failed {
			r.Failed, r.FailureReason = true, "traffic check: "+c.Name+": "+c.Detail
		}
	}
	return Outcome{Run: r, Checks: checks}
}

// watchedProcess is a process a run depends on, and its role in the run's
// figures ("" to leave it unsampled).
type watchedProcess struct {
	role string
	p    *proc.Process
}

// loadCommand is `meshperf load`'s arguments for a run against target,
// and its environment (nil: the lab's).
func (l *lab) loadCommand(spec scenario.RunSpec, r results.Run, jsonPath string, target []string) (args, env []string, err error) {
	// The load generator records the run's provenance in its result, so
	// that the file says what it measured wherever it is taken.
	prov, err := json.Marshal(r.Provenance)
	if err != nil {
		return nil, nil, fmt.Errorf("provenance: %w", err)
	}
	args = append(append([]string{"load"}, spec.LoadArgs(r.Label, jsonPath)...), "-provenance", string(prov))
	if d := l.cfg.LoadDashboard; l.loadDashboardURL != "" {
		args = append(args, "-dashboard", l.loadDashboardURL, "-dashboard-session", d.Session)
		if d.Token != "" {
			env = append(os.Environ(), live.TokenEnv+"="+d.Token)
		}
	}
	return append(args, target...), env, nil
}

// runLoad runs `meshperf ARGS` (a load generator writing a Fortio JSON
// result to jsonPath) in the client pod, sampling it (as loadRole) and
// every watched process over the steady window, and lays its figures over
// r. It returns why the run failed, if it did, and the window's edges.
func (l *lab) runLoad(ctx context.Context, spec scenario.RunSpec, r results.Run, watched []watchedProcess, loadRole string, args, env []string, jsonPath string) (_ results.Run, winStart, winEnd time.Time, reason string) {
	sampler := procstat.NewSampler(500 * time.Millisecond)
	var infra []*proc.Process
	for _, w := range watched {
		infra = append(infra, w.p)
		if w.role != "" {
			_ = sampler.Add(w.role, w.p.PID())
		}
	}
	load, err := l.client.Start(proc.Spec{Name: "load generator", Path: l.cfg.MeshperfBin, Args: args, Env: env,
		LogPath: filepath.Join(l.logDir, "load.log")})
	if err != nil {
		return r, winStart, winEnd, "load generator: " + err.Error()
	}
	l.addPID(load.PID())
	_ = sampler.Add(loadRole, load.PID())
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go sampler.Run(sctx)
	if l.cfg.hook != nil {
		l.cfg.hook("load-started", l, spec)
	}
	winStart, winEnd, reason = l.watchLoad(ctx, spec, sampler, load, infra)
	stopSampling()
	if reason != "" {
		_ = load.Stop()
		return r, winStart, winEnd, reason
	}
	got, err := results.ReadFortioFile(jsonPath)
	if err != nil {
		return r, winStart, winEnd, err.Error()
	}
	r = MergeLoad(r, got)
	r.Processes = processes(sampler.Window(winStart, winEnd), r.ActualQPS)
	return r, winStart, winEnd, ""
}

// watchLoad waits for the load generator to finish, marking the steady
// window's edges on the way, and returns why the run failed if it did: the
// generator failed, or a process the run depends on exited.
func (l *lab) watchLoad(ctx context.Context, spec scenario.RunSpec, s *procstat.Sampler, load *proc.Process, infra []*proc.Process) (time.Time, time.Time, string) {
	started := time.Now()
	// The window ends a little before the load does, so that the generator
	// is still alive for the last sample.
	warm := time.NewTimer(spec.Warmup)
	end := time.NewTimer(max(spec.Duration-150*time.Millisecond, spec.Warmup+50*time.Millisecond))
	limit := time.NewTimer(spec.Duration + spec.Timeout + 20*time.Second)
	defer warm.Stop()
	defer end.Stop()
	defer limit.Stop()
	var winStart, winEnd time.Time
	died := make(chan *proc.Process, len(infra))
	stop := make(chan struct{})
	defer close(stop)
	for _, p := range infra {
		go func() {
			select {
			case <-p.Done():
				died <- p
			case <-stop:
			}
		}()
	}
	for {
		select {
		case <-warm.C:
			winStart = s.SampleNow()
		case <-end.C:
			winEnd = s.SampleNow()
		case p := <-died:
			return winStart, winEnd, p.ExitReason()
		case <-ctx.Done():
			return winStart, winEnd, "interrupted"
		case <-limit.C:
			return winStart, winEnd, fmt.Sprintf("load generator still running %s after it should have ended", time.Since(started).Round(time.Second))
		case <-load.Done():
			if err := load.Wait(); err != nil {
				return winStart, winEnd, load.ExitReason()
			}
			for _, p := range infra {
				if p.Exited() {
					return winStart, winEnd, p.ExitReason()
				}
			}
			if winEnd.IsZero() {
				winEnd = time.Now()
			}
			return winStart, winEnd, ""
		}
	}
}

// infra are the processes a run depends on besides the load generator.
func (l *lab) infra() []*proc.Process {
	out := []*proc.Process{l.pilot.Process, l.serverApp}
	for _, p := range []*proc.Process{l.clientSC, l.serverSC, l.waypoint} {
		if p != nil {
			out = append(out, p)
		}
	}
	for _, n := range l.nodes {
		if n.proxy != nil {
			out = append(out, n.proxy)
		}
	}
	return out
}

// roleOf is the results' role of a process the lab started, by its name.
func roleOf(p *proc.Process) string { return roleOfName(p.Name()) }

// roleOfName is the results' role of the lab's process or node role name.
func roleOfName(name string) string {
	switch name {
	case clientSidecar:
		return results.RoleClientSidecar
	case serverSidecar:
		return results.RoleServerSidecar
	case clientNodeProxy:
		return results.RoleClientNodeProxy
	case serverNodeProxy:
		return results.RoleServerNodeProxy
	case waypointRole:
		return results.RoleWaypoint
	case "echo server":
		return results.RoleServerApp
	}
	return ""
}

// MergeLoad lays the load generator's figures over the runner's fields.
func MergeLoad(r, got results.Run) results.Run {
	r.StartTime, r.ActualQPS, r.Duration = got.StartTime, got.ActualQPS, got.Duration
	r.Latency, r.Spectrum, r.Corrected, r.Calls, r.Errors, r.Codes = got.Latency, got.Spectrum, got.Corrected, got.Calls, got.Errors, got.Codes
	r.ErrorPercent, r.ResponseSize, r.FortioJSON, r.SendDelayP99 = got.ErrorPercent, got.ResponseSize, got.FortioJSON, got.SendDelayP99
	if got.Label != "" {
		r.Label = got.Label
	}
	return r
}

// processes turns the window's usage into the run's processes; rps is the
// rate the load kept, which makes the context switches per request.
func processes(us []procstat.ProcessUsage, rps float64) []results.Process {
	const mib = 1 << 20
	var out []results.Process
	for _, u := range us {
		p := results.Process{Role: u.Name, PID: u.PID, VCPU: math.NaN(), PSSMB: math.NaN(),
			RSSMB: float64(u.MeanRSS) / mib, MaxRSSMB: float64(u.MaxRSS) / mib}
		if u.Samples == 0 {
			p.RSSMB, p.MaxRSSMB = math.NaN(), math.NaN()
		}
		if u.Err == nil {
			p.VCPU = u.VCPU
			c := results.UnknownCounters()
			c.UserVCPU, c.SystemVCPU = u.UserVCPU, u.SystemVCPU
			if requests := rps * u.Wall.Seconds(); u.SwitchesKnown && requests > 0 {
				c.VoluntarySwitchesPerRequest = float64(u.VoluntarySwitches) / requests
				c.InvoluntarySwitchesPerRequest = float64(u.InvoluntarySwitches) / requests
			}
			p.Counters = &c
		}
		if u.PSSKnown {
			p.PSSMB = float64(u.MeanPSS) / mib
		}
		out = append(out, p)
	}
	return out
}

// MetricsSnapshot is the proxies' metrics at one moment ("" without one):
// the sidecars', the node proxies' and the waypoint's, in Prometheus's
// text format.
type MetricsSnapshot struct {
	Client, Server         string
	ClientNode, ServerNode string
	Waypoint               string
}

func (l *lab) scrape(ctx context.Context) (MetricsSnapshot, error) {
	var m MetricsSnapshot
	var errs []error
	var err error
	if l.clientSC != nil {
		m.Client, err = newAdmin(l.client.IP()).metrics(ctx)
		errs = append(errs, err)
	}
	if l.serverSC != nil {
		m.Server, err = newAdmin(l.server.IP()).metrics(ctx)
		errs = append(errs, err)
	}
	if l.waypoint != nil {
		m.Waypoint, err = newAdmin(l.waypointPod.IP()).metrics(ctx)
		errs = append(errs, err)
	}
	for _, n := range l.nodes {
		if n.proxy == nil {
			continue
		}
		dst := &m.ClientNode
		if n.role == serverNodeProxy {
			dst = &m.ServerNode
		}
		*dst, err = nodeStats(n).metrics(ctx)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("proxy metrics: %w", err)
	}
	return m, nil
}
