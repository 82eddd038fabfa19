package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
	"github.com/meshperf/meshperf/internal/results"
)

// loadRun is one generator's run in one round of one case.
type loadRun struct {
	generator   string
	rate, round int
	url         string
	server      *proc.Process
}

// name is the run's file stem in LoadOptions.Dir.
func (r loadRun) name() string {
	return fmt.Sprintf("%s-%s-%d", caseName(r.rate), r.generator, r.round)
}

// LoadMeasure is what one run of one generator measured.
type LoadMeasure struct {
	Generator string
	Rate      int // requested; 0 flat out
	Round     int
	Calls     int64
	Errors    int64
	ActualQPS float64
	// Life is how long the generator ran, start-up included; its CPU and
	// switches are over the same life (the kernel's accounting of the
	// child, which counts threads that exited too).
	Started                                time.Time
	Life                                   time.Duration
	UserCPU, SystemCPU                     time.Duration
	MaxRSS                                 uint64 // bytes: its peak (VmHWM) as last sampled
	VoluntarySwitches, InvoluntarySwitches int64
	// Syscalls the generator made while perf watched it, which is from
	// just after its start to its exit; NaN without perf.
	Syscalls float64
	// Server is the echo server's usage over the generator's life.
	Server procstat.Usage
	// Run is the run as stored: the generator's figures and latencies as
	// it reports them, its process and the server's.
	Run results.Run
}

// CPUPerRequest is the generator's CPU per call, microseconds.
func (m *LoadMeasure) CPUPerRequest() float64 {
	return 1e6 * perRequest((m.UserCPU+m.SystemCPU).Seconds(), m.Calls)
}

// Brief is the run's progress line.
func (m *LoadMeasure) Brief() string {
	return fmt.Sprintf("%.0f rps, %.1f µs CPU/request, P99 %.3f ms, server %.2f vCPU",
		m.ActualQPS, m.CPUPerRequest(), m.Run.Latency.P99, m.Server.VCPU)
}

// measureLoad runs one generator against the server and measures it.
func measureLoad(ctx context.Context, o LoadOptions, r loadRun) (*LoadMeasure, error) {
	resultFile := filepath.Join(o.Dir, r.name()+".json")
	spec := proc.Spec{Name: r.generator, LogPath: filepath.Join(o.Dir, r.name()+".log"), ParentDeathSignal: syscall.SIGKILL}
	switch r.generator {
	case GeneratorMeshperf:
		spec.Path, spec.Args = o.Meshperf, fortioLoadArgs(o, r, resultFile)
	case GeneratorFortio:
		spec.Path, spec.Args = o.Fortio, fortioLoadArgs(o, r, resultFile)
	case GeneratorWrk:
		spec.Path, spec.Args = o.Wrk, wrkArgs(o, r)
	default:
		return nil, fmt.Errorf("bench load: unknown generator %q", r.generator)
	}
	serverBefore, err := procstat.Read(r.server.PID())
	if err != nil {
		return nil, fmt.Errorf("bench load: echo server: %w", err)
	}
	started := time.Now()
	p, err := proc.Start(spec)
	if err != nil {
		return nil, fmt.Errorf("bench load: %w", err)
	}
	var perf *SyscallCounter
	if o.Perf != "" {
		// Without a count the figure is NaN; the run goes on.
		perf, _ = CountSyscalls(o.Perf, p.PID(), filepath.Join(o.Dir, r.name()+".perf"), 0, "")
	}
	peak := watchPeakRSS(p)
	if err := waitGenerator(ctx, p, o.Duration); err != nil {
		if perf != nil {
			_ = perf.Stop()
		}
		return nil, err
	}
	life := time.Since(started)
	serverAfter, err := procstat.Read(r.server.PID())
	if err != nil {
		return nil, fmt.Errorf("bench load: echo server: %w", err)
	}
	m := &LoadMeasure{Generator: r.generator, Rate: r.rate, Round: r.round, Started: started, Life: life, Syscalls: math.NaN()}
	if m.Server, err = procstat.Between(serverBefore, serverAfter); err != nil {
		return nil, fmt.Errorf("bench load: echo server: %w", err)
	}
	if ru, ok := p.State().SysUsage().(*syscall.Rusage); ok {
		m.UserCPU = time.Duration(ru.Utime.Nano())
		m.SystemCPU = time.Duration(ru.Stime.Nano())
		m.VoluntarySwitches, m.InvoluntarySwitches = ru.Nvcsw, ru.Nivcsw
	}
	m.MaxRSS = <-peak
	if perf != nil {
		m.Syscalls = perf.Count()
	}
	if r.generator == GeneratorWrk {
		m.Run, err = readWrk(spec.LogPath)
	} else {
		m.Run, err = results.ReadFortioFile(resultFile)
	}
	if err != nil {
		return nil, fmt.Errorf("bench load: %s: %w", r.generator, err)
	}
	m.Calls, m.Errors, m.ActualQPS = m.Run.Calls, m.Run.Errors, m.Run.ActualQPS
	if m.Calls == 0 {
		return nil, fmt.Errorf("bench load: %s made no calls in %s; its log: %s", r.generator, r.name(), spec.LogPath)
	}
	m.fillRun(o, r, p.PID(), r.server.PID())
	return m, nil
}

// rssInterval is how often a generator's peak RSS is read while it runs.
const rssInterval = 200 * time.Millisecond

// watchPeakRSS reads the generator's peak resident set (VmHWM) from /proc
// while it runs and sends the last reading once it has exited. Not
// rusage's maxrss: Linux carries into it, across exec, the resident set
// of the process that forked the child (this one's, tens of MB, since Go
// forks by vfork), which would charge every generator with meshperf
// bench's own memory.
func watchPeakRSS(p *proc.Process) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		tick := time.NewTicker(rssInterval)
		defer tick.Stop()
		for {
			if s, err := procstat.Read(p.PID()); err == nil {
				peak = max(peak, s.HWM)
			}
			select {
			case <-p.Done():
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// fortioLoadArgs are the arguments of `fortio load` and of meshperf load,
// which takes Fortio's flags.
func fortioLoadArgs(o LoadOptions, r loadRun, resultFile string) []string {
	args := []string{"load", "-quiet", "-qps", strconv.Itoa(r.rate), "-c", strconv.Itoa(o.Connections),
		"-t", o.Duration.String(), "-json", resultFile, "-labels", r.name()}
	return append(args, r.url)
}

// wrkArgs run wrk flat out with a thread per CPU (its own advice; never
// more threads than connections), asking for its latency distribution.
// wrk takes its duration in whole seconds.
func wrkArgs(o LoadOptions, r loadRun) []string {
	threads := min(runtime.NumCPU(), o.Connections)
	secs := max(1, int(math.Ceil(o.Duration.Seconds())))
	return []string{"-t", strconv.Itoa(threads), "-c", strconv.Itoa(o.Connections), "-d", strconv.Itoa(secs) + "s",
		"--latency", r.url}
}

// waitGenerator waits for a generator to end by itself, which it does
// after its duration; past a generous bound, or when ctx ends, it is
// stopped and the run fails.
func waitGenerator(ctx context.Context, p *proc.Process, d time.Duration) error {
	limit := time.NewTimer(d + 30*time.Second)
	defer limit.Stop()
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Stop()
		return ctx.Err()
	case <-limit.C:
		_ = p.Stop()
		return fmt.Errorf("bench load: %s still running 30s after its %s", p.Name(), d)
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("bench load: %s", p.ExitReason())
	}
	return nil
}

// fillRun completes the stored run: the benchmark's scenario and case,
// the generator as the mode, and the two processes with their counters.
func (m *LoadMeasure) fillRun(o LoadOptions, r loadRun, genPID, serverPID int) {
	run := &m.Run
	run.Scenario, run.Mode, run.Protocol = LoadScenario, r.generator, "http"
	run.Repetition, run.Connections, run.RequestedQPS = r.round, o.Connections, r.rate
	run.PayloadSize, run.Network = o.ResponseSize, "loopback"
	run.Label = fmt.Sprintf("bench_load_%s_c_%d_%d_%s", caseName(r.rate), o.Connections, o.ResponseSize, r.generator)
	if run.StartTime.IsZero() { // wrk says not when it started
		run.StartTime = m.Started.UTC()
	}
	wall := m.Life.Seconds()
	rssMB := float64(m.MaxRSS) / (1 << 20)
	gen := results.ProcessCounters{
		UserVCPU:                      m.UserCPU.Seconds() / wall,
		SystemVCPU:                    m.SystemCPU.Seconds() / wall,
		SyscallsPerRequest:            perRequest(m.Syscalls, m.Calls),
		VoluntarySwitchesPerRequest:   perRequest(float64(m.VoluntarySwitches), m.Calls),
		InvoluntarySwitchesPerRequest: perRequest(float64(m.InvoluntarySwitches), m.Calls),
		AllocationsPerRequest:         math.NaN(),
	}
	srv := results.UnknownCounters()
	srv.UserVCPU, srv.SystemVCPU = m.Server.UserVCPU, m.Server.SystemVCPU
	if m.Server.SwitchesKnown {
		srv.VoluntarySwitchesPerRequest = perRequest(float64(m.Server.VoluntarySwitches), m.Calls)
		srv.InvoluntarySwitchesPerRequest = perRequest(float64(m.Server.InvoluntarySwitches), m.Calls)
	}
	pss := math.NaN()
	if m.Server.PSSKnown {
		pss = float64(m.Server.PSS) / (1 << 20)
	}
	run.Processes = []results.Process{
		// The generator's resident set is its peak: its life is the run.
		{Role: results.RoleClientApp, PID: genPID, VCPU: (m.UserCPU + m.SystemCPU).Seconds() / wall,
			RSSMB: rssMB, PSSMB: math.NaN(), MaxRSSMB: rssMB, Counters: &gen},
		{Role: results.RoleServerApp, PID: serverPID, VCPU: m.Server.VCPU, RSSMB: float64(m.Server.RSS) / (1 << 20),
			PSSMB: pss, MaxRSSMB: float64(m.Server.MaxHWM) / (1 << 20), Counters: &srv},
	}
}
