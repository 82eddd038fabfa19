package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
	"github.com/meshperf/meshperf/internal/results"
)

// The steady window of a measured run, where CPU and the counters are
// taken: from windowLead after the load starts (its connections are up)
// to windowTrail before it ends (it is still sending at the last sample).
const (
	windowLead  = 300 * time.Millisecond
	windowTrail = 200 * time.Millisecond
)

// runFigures are one run's figures for one subject: the load's rate and
// latency, and its proxies' costs, each a mean over its proxies (the mTLS
// cases' two), so that they read "per proxy".
type runFigures struct {
	RPS                    float64
	P50, P90, P99, P999    float64 // ms
	VCPU, UserVCPU, SysCPU float64 // per proxy
	RSSMB                  float64 // per proxy
	Syscalls               float64 // per request, per proxy
	Voluntary, Involuntary float64 // context switches per request, per proxy
	Allocations            float64 // per request, per proxy; NaN unless meshperf-proxy counts them
}

func (f runFigures) per1k(v float64) float64 {
	if f.RPS <= 0 {
		return math.NaN()
	}
	return v / (f.RPS / 1000)
}

// line is the progress line of one run.
func (f runFigures) line() string {
	s := fmt.Sprintf("%8.0f rps  P50 %.3f  P99 %.3f ms", f.RPS, f.P50, f.P99)
	if !math.IsNaN(f.VCPU) {
		s += fmt.Sprintf("  %.3f vCPU/1k rps  %.1f MB  %.1f syscalls/req", f.per1k(f.VCPU), f.RSSMB, f.Syscalls)
	}
	return s
}

// measure runs the load through one subject: a warm-up at the same rate,
// then the measured run, sampling its proxies (CPU, memory, context
// switches), counting their syscalls with perf and meshperf-proxy's
// allocations over the steady window. It returns the stored run and its
// figures.
func (b *proxyBench) measure(ctx context.Context, s *subject, caseName string, p scenario.Protocol, qps, round int) (results.Run, runFigures, error) {
	spec := scenario.RunSpec{Scenario: ProxyScenario, Repetition: round, Mode: scenario.Mode(s.mode), Protocol: p,
		Connections: b.cfg.Connections, QPS: qps, Timeout: scenario.DefaultTimeout, PayloadSize: b.cfg.Size, MTLS: caseName == CaseMTLS && s.name != SubjectNoProxy}
	label := fmt.Sprintf("%s_qps_%s_c_%d_%d_%s", b.cfg.RunID, qpsWord(qps), spec.Connections, spec.PayloadSize, s.mode)
	base := filepath.Join(b.cfg.OutDir, fmt.Sprintf("%s_%s_rep%d", label, p, round))
	target := []string{"-H", "Host: " + lab.ServerHost(), "http://" + s.target.String() + spec.EchoPath()}
	if b.cfg.Warmup > 0 {
		spec.Duration = b.cfg.Warmup
		load, err := b.startLoad(spec, label, base+"_warmup.json", target)
		if err != nil {
			return results.Run{}, runFigures{}, err
		}
		if err := b.waitLoad(ctx, load, s); err != nil {
			return results.Run{}, runFigures{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	spec.Duration = b.cfg.Duration
	sampler := procstat.NewSampler(500 * time.Millisecond)
	for _, sp := range s.procs {
		if err := sampler.Add(sp.role, sp.p.PID()); err != nil {
			return results.Run{}, runFigures{}, err
		}
	}
	if err := sampler.Add(results.RoleServerApp, b.echo.PID()); err != nil {
		return results.Run{}, runFigures{}, err
	}
	load, err := b.startLoad(spec, label, base+".json", target)
	if err != nil {
		return results.Run{}, runFigures{}, err
	}
	_ = sampler.Add(results.RoleClientApp, load.PID())
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go sampler.Run(sctx)

	window := b.cfg.Duration - windowLead - windowTrail
	counts := b.countWindow(ctx, sampler, s, window, base)
	if err := b.waitLoad(ctx, load, s); err != nil {
		return results.Run{}, runFigures{}, err
	}
	stopSampling()
	c := <-counts
	if c.err != nil {
		return results.Run{}, runFigures{}, c.err
	}
	got, err := results.ReadFortioFile(base + ".json")
	if err != nil {
		return results.Run{}, runFigures{}, err
	}
	if got.Calls == 0 || got.ErrorPercent > 0 {
		return results.Run{}, runFigures{}, fmt.Errorf("%s: %d calls, %.1f%% errors (load log: %s)", s.name, got.Calls, got.ErrorPercent, load.LogPath())
	}
	r := b.record(got, spec, s, label)
	figs := runFigures{RPS: got.ActualQPS, P50: got.Latency.P50, P90: got.Latency.P90, P99: got.Latency.P99, P999: got.Latency.P999}
	r.Processes, figs = processesOf(sampler.Window(c.start, c.end), c, got.ActualQPS*c.end.Sub(c.start).Seconds(), figs)
	return r, figs, nil
}

// record is the stored run: the load's result with the benchmark's
// fields and the subject's data plane.
func (b *proxyBench) record(got results.Run, spec scenario.RunSpec, s *subject, label string) results.Run {
	r := got
	r.RunID, r.Label, r.Scenario, r.Mode, r.Protocol = b.cfg.RunID, label, ProxyScenario, s.mode, string(spec.Protocol)
	r.Repetition, r.Connections, r.RequestedQPS, r.PayloadSize, r.MTLS = spec.Repetition, spec.Connections, spec.QPS, spec.PayloadSize, spec.MTLS
	r.Network = "loopback"
	r.Provenance = b.prov
	r.Provenance.DataPlane = s.dataPlane
	if s.pilot {
		r.Provenance.ControlPlane = results.ThisBuild().Component(results.ComponentPilot)
	}
	return r
}

func (b *proxyBench) startLoad(spec scenario.RunSpec, label, jsonPath string, target []string) (*proc.Process, error) {
	args := append(append([]string{"load"}, spec.LoadArgs(label, jsonPath)...), target...)
	p, err := proc.Start(proc.Spec{Name: "load generator", Path: b.cfg.MeshperfBin, Args: args,
		LogPath: filepath.Join(b.cfg.OutDir, "load.log")})
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return p, nil
}

// waitLoad waits for the load to end, bounded by its duration and timeout,
// and fails when it or a proxy of the subject failed.
func (b *proxyBench) waitLoad(ctx context.Context, load *proc.Process, s *subject) error {
	limit := time.NewTimer(b.cfg.Duration + b.cfg.Warmup + scenario.DefaultTimeout + 20*time.Second)
	defer limit.Stop()
	select {
	case <-load.Done():
	case <-ctx.Done():
		_ = load.Stop()
		return ctx.Err()
	case <-limit.C:
		_ = load.Stop()
		return fmt.Errorf("load generator still running after %s", b.cfg.Duration)
	}
	if err := load.Wait(); err != nil {
		return fmt.Errorf("load generator: %s", load.ExitReason())
	}
	for _, sp := range s.procs {
		if sp.p.Exited() {
			return fmt.Errorf("%s: %s", sp.p.Name(), sp.p.ExitReason())
		}
	}
	return nil
}

// windowCounts are the steady window's edges and what each proxy counted
// in it, by role.
type windowCounts struct {
	start, end  time.Time
	syscalls    map[string]float64
	allocations map[string]float64
	err         error
}

// countWindow waits windowLead into the run, then samples, starts perf on
// every proxy for the window and reads meshperf-proxy's allocation
// counter, and at the window's end samples and reads it again. The result
// arrives on the channel once perf has written its counts.
func (b *proxyBench) countWindow(ctx context.Context, sampler *procstat.Sampler, s *subject, window time.Duration, base string) <-chan windowCounts {
	out := make(chan windowCounts, 1)
	go func() {
		c := windowCounts{syscalls: map[string]float64{}, allocations: map[string]float64{}}
		defer func() { out <- c }()
		select {
		case <-ctx.Done():
			c.err = ctx.Err()
			return
		case <-time.After(windowLead):
		}
		c.start = sampler.SampleNow()
		allocBefore := b.allocations(ctx, s)
		var perfs []*SyscallCounter
		if b.cfg.PerfBin != "" {
			for _, sp := range s.procs {
				p, err := CountSyscalls(b.cfg.PerfBin, sp.p.PID(), base+"_"+sp.role+".perf", window, filepath.Join(b.cfg.OutDir, "perf.log"))
				if err != nil {
					c.err = err
					return
				}
				perfs = append(perfs, p)
			}
		}
		select {
		case <-ctx.Done():
			c.err = ctx.Err()
		case <-time.After(window):
		}
		c.end = sampler.SampleNow()
		allocAfter := b.allocations(ctx, s)
		for role, before := range allocBefore {
			if after, ok := allocAfter[role]; ok {
				c.allocations[role] = after - before
			}
		}
		for i, p := range perfs {
			n, err := p.Result()
			if err != nil {
				c.err = fmt.Errorf("%s: %w", s.procs[i].role, err)
				return
			}
			c.syscalls[s.procs[i].role] = n
		}
	}()
	return out
}

// allocationsMetric is meshperf-proxy's count of its heap allocations, on
// its admin /stats/prometheus when the build counts them.
const allocationsMetric = "meshperf_proxy_allocations_total"

// allocations reads each meshperf-proxy's allocation counter, by role;
// a proxy without it (HAProxy, a build that does not count) is absent.
func (b *proxyBench) allocations(ctx context.Context, s *subject) map[string]float64 {
	out := map[string]float64{}
	client := &http.Client{Timeout: 2 * time.Second}
	for _, sp := range s.procs {
		if sp.admin == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, sp.admin+"/stats/prometheus", nil)
		if err != nil {
			continue
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		if v, ok := counterTotal(string(body), allocationsMetric); ok {
			out[sp.role] = v
		}
	}
	return out
}

// counterTotal adds up every sample of a Prometheus text counter, with or
// without labels; false when the text has none.
func counterTotal(text, name string) (float64, bool) {
	total, found := 0.0, false
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64); err == nil {
			total, found = total+v, true
		}
	}
	return total, found
}

// processesOf turns the window's usage into the run's processes, the
// proxies with their counters (requests: the requests completed in the
// window), and lays the proxies' mean figures over figs.
func processesOf(us []procstat.ProcessUsage, c windowCounts, requests float64, figs runFigures) ([]results.Process, runFigures) {
	const mib = 1 << 20
	perReq := func(v float64) float64 {
		if requests <= 0 {
			return math.NaN()
		}
		return v / requests
	}
	var out []results.Process
	var proxies []results.Process
	for _, u := range us {
		p := results.Process{Role: u.Name, PID: u.PID, VCPU: math.NaN(), PSSMB: math.NaN(), RSSMB: math.NaN(), MaxRSSMB: math.NaN()}
		if u.Samples > 0 {
			p.RSSMB, p.MaxRSSMB = float64(u.MeanRSS)/mib, float64(u.MaxRSS)/mib
		}
		if u.PSSKnown {
			p.PSSMB = float64(u.MeanPSS) / mib
		}
		counters := results.UnknownCounters()
		if u.Err == nil {
			p.VCPU = u.VCPU
			counters.UserVCPU, counters.SystemVCPU = u.UserVCPU, u.SystemVCPU
			if u.SwitchesKnown {
				counters.VoluntarySwitchesPerRequest = perReq(float64(u.VoluntarySwitches))
				counters.InvoluntarySwitchesPerRequest = perReq(float64(u.InvoluntarySwitches))
			}
		}
		if n, ok := c.syscalls[u.Name]; ok {
			counters.SyscallsPerRequest = perReq(n)
		}
		if n, ok := c.allocations[u.Name]; ok {
			counters.AllocationsPerRequest = perReq(n)
		}
		p.Counters = &counters
		out = append(out, p)
		if p.Sidecar() {
			proxies = append(proxies, p)
		}
	}
	mean := func(get func(results.Process) float64) float64 {
		if len(proxies) == 0 {
			return math.NaN()
		}
		sum := 0.0
		for _, p := range proxies {
			sum += get(p)
		}
		return sum / float64(len(proxies))
	}
	figs.VCPU = mean(func(p results.Process) float64 { return p.VCPU })
	figs.UserVCPU = mean(func(p results.Process) float64 { return p.Counters.UserVCPU })
	figs.SysCPU = mean(func(p results.Process) float64 { return p.Counters.SystemVCPU })
	figs.RSSMB = mean(func(p results.Process) float64 { return p.RSSMB })
	figs.Syscalls = mean(func(p results.Process) float64 { return p.Counters.SyscallsPerRequest })
	figs.Voluntary = mean(func(p results.Process) float64 { return p.Counters.VoluntarySwitchesPerRequest })
	figs.Involuntary = mean(func(p results.Process) float64 { return p.Counters.InvoluntarySwitchesPerRequest })
	figs.Allocations = mean(func(p results.Process) float64 { return p.Counters.AllocationsPerRequest })
	return out, figs
}
