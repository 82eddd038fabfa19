package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
)

// Lab runs `meshperf lab run|list|sweep|soak|clean`. Exit status: 0 every run
// succeeded; 1 a run failed or the lab could not start; 2 bad arguments.
func Lab(args []string, stdout, stderr io.Writer) int {
	lab := commandGroup{
		name:  "meshperf lab",
		about: "Runs scenarios: pods with and without sidecars, load through them, and what the mesh costs.",
		subs: []subcommand{
			{name: "run", about: "run a scenario (the default one without SCENARIO) and store its results",
				run: func(args []string) int { return labRun(args, stdout, stderr) }},
			{name: "list", about: "list the shipped scenarios, their runs and how long they take",
				run: func(args []string) int { return labList(args, stdout, stderr) }},
			{name: "sweep", about: "raise the rate through each mode up to saturation: knees, capacities under latency objectives, sizing advice",
				run: func(args []string) int { return labSweep(args, stdout, stderr) }},
			{name: "soak", about: "one long run through the sidecars, watching each sidecar's memory over time",
				run: func(args []string) int { return labSoak(args, stdout, stderr) }},
			{name: "manifest", about: "render a scenario's objects per mode for a cluster (what lab run --kube applies), without a cluster",
				run: func(args []string) int { return labManifest(args, stdout, stderr) }},
			{name: "clean", about: "remove the pods, links and processes an interrupted run left behind",
				run: func(args []string) int { return labClean(args, stdout, stderr) }},
		},
	}
	return lab.run(args, stdout, stderr)
}

func labList(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab list", "", "Lists the shipped scenarios: how many runs each makes and about how long it takes.")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	list, err := scenario.List()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	for _, s := range list {
		runs := len(s.Expand())
		def := ""
		if s.Name == scenario.DefaultName {
			def = " (default)"
		}
		fmt.Fprintf(stdout, "%s%s: %d runs, about %s\n  %s\n", s.Name, def, runs,
			s.EstimatedDuration().Round(time.Second), s.Description)
	}
	return exitOK
}

func labClean(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab clean", "", "Removes what an interrupted lab run left behind: its processes, network namespaces and links,\n"+
		"and the temporary directories (pods' tokens, ZDS sockets) of runs whose process is gone.")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	r, err := pod.Clean(pod.Prefix)
	dirs, dirsErr := lab.CleanRunTempDirs()
	err = errors.Join(err, dirsErr)
	if r.Empty() && len(dirs) == 0 {
		fmt.Fprintln(stdout, "meshperf lab clean: nothing to remove")
	}
	if len(dirs) > 0 {
		fmt.Fprintf(stdout, "removed %d temporary director(ies) of runs that are gone: %s\n", len(dirs), strings.Join(dirs, " "))
	}
	if len(r.Processes) > 0 {
		fmt.Fprintf(stdout, "killed %d process(es): %v\n", len(r.Processes), r.Processes)
	}
	if len(r.Netns) > 0 {
		fmt.Fprintf(stdout, "deleted %d network namespace(s): %s\n", len(r.Netns), strings.Join(r.Netns, " "))
	}
	if len(r.Links) > 0 {
		fmt.Fprintf(stdout, "deleted %d link(s): %s\n", len(r.Links), strings.Join(r.Links, " "))
	}
	if len(r.Cgroups) > 0 {
		fmt.Fprintf(stdout, "removed %d CPU-limit cgroup(s): %s\n", len(r.Cgroups), strings.Join(r.Cgroups, " "))
	}
	return cmd.exit(stderr, err)
}

// labRunFlags are `lab run`'s own flags beside the scenario overrides.
type labRunFlags struct {
	out, db, proxy, network, ztunnel string
	labels                           string
	keep                             bool
	prometheus                       bool
	promInterval                     time.Duration
}

func labRun(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab run", "[SCENARIO|FILE] [flags]",
		"Runs a scenario (shipped: "+strings.Join(scenario.Names(), ", ")+"; or a YAML file), "+
			"the default one without SCENARIO;\nthe flags override the scenario's values.")
	var publish publishFlags
	var kube kubeFlags
	kube.define(cmd.flags)
	cfg, err := parseLabRun(cmd, args, stdout, labRunOptions{defaultScenario: scenario.DefaultName, scenarioFlags: overrideFlags,
		prometheus: true, ztunnel: true, publish: &publish, kube: &kube})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if kube.on {
		return runKubeLab(cmd, cfg, &kube, &publish, stdout, stderr)
	}
	return runLabMatrix(cmd, cfg, &publish, stdout, stderr)
}

// runLabMatrix runs the lab as cfg says, publishing to the dashboard when
// publish has one. Exit status: 0 every run succeeded; 1 a run failed or
// the lab could not start.
func runLabMatrix(cmd *command, cfg lab.Config, publish *publishFlags, stdout, stderr io.Writer) int {
	for _, n := range cfg.Scenario.Notes() {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	ctx, stop := labContext(stderr)
	defer stop()
	cfg.Out, cfg.Progress, cfg.ProgressTTY = stdout, stdout, isTerminal(stdout)
	pub := startLabPublishing(publish, &cfg, stderr)
	rep, err := lab.Run(ctx, cfg)
	failed := failedRuns(rep)
	if pub != nil {
		pub.Publish(labEndEvent(rep, failed, ctx.Err(), err))
		pub.Close()
	}
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if failed > 0 || ctx.Err() != nil {
		return exitFailed
	}
	return exitOK
}

// failedRuns counts rep's failed runs; none without a report.
func failedRuns(rep *lab.Report) int {
	failed := 0
	if rep != nil {
		for _, o := range rep.Outcomes {
			if o.Run.Failed {
				failed++
			}
		}
	}
	return failed
}

// startLabPublishing opens the lab's live session (or joins the one
// -dashboard-session names) and has each run's load generator publish
// into it; nil without -dashboard.
func startLabPublishing(f *publishFlags, cfg *lab.Config, stderr io.Writer) *live.Publisher {
	specs := cfg.Scenario.Expand()
	pub := f.start("meshperf lab", live.Opening{Source: live.SourceLab, Scenario: cfg.Scenario.Name, Label: cfg.Labels}, stderr)
	if pub == nil {
		return nil
	}
	pub.Publish(live.Event{Kind: live.KindStart, RunTotal: len(specs),
		Message: fmt.Sprintf("%s: %d runs, about %s", cfg.Scenario.Name, len(specs), cfg.Scenario.EstimatedDuration().Round(time.Second))})
	cfg.Live = pub
	// The load generators need the session's id: waiting for it costs at
	// most the publisher's request timeout, once, before the lab starts.
	if session := pub.Session(); session != "" {
		cfg.LoadDashboard = lab.LoadDashboard{URL: f.url, Token: f.token, Session: session}
	}
	return pub
}

// labEndEvent ends the lab's live session: done when every run succeeded,
// else failed with why.
func labEndEvent(rep *lab.Report, failed int, interrupted, err error) live.Event {
	runs := 0
	if rep != nil {
		runs = len(rep.Outcomes)
	}
	switch {
	case err != nil:
		return live.Event{Kind: live.KindError, Message: err.Error()}
	case interrupted != nil:
		return live.Event{Kind: live.KindError, Message: fmt.Sprintf("interrupted after %d runs", runs)}
	case failed > 0:
		return live.Event{Kind: live.KindError, Message: fmt.Sprintf("%d of %d runs failed", failed, runs)}
	}
	return live.Event{Kind: live.KindEnd, Message: fmt.Sprintf("%d runs stored", runs)}
}

// labContext ends on Ctrl-C or SIGTERM, saying that the lab is cleaning
// up; a second Ctrl-C ends meshperf at once, leaving what it started for
// `meshperf lab clean`.
func labContext(stderr io.Writer) (context.Context, context.CancelFunc) {
	return labContextCleanedBy(stderr, "run meshperf lab clean")
}

// labContextCleanedBy is labContext saying how to remove what a forced
// stop leaves (afterForce).
func labContextCleanedBy(stderr io.Writer, afterForce string) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// Restoring the default handling lets a second Ctrl-C end meshperf
		// at once.
		stop()
		fmt.Fprintf(stderr, "\nmeshperf lab: stopping and cleaning up (Ctrl-C again to force; then %s)\n", afterForce)
	}()
	return ctx, stop
}

func labSoak(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab soak", "[SCENARIO|FILE] [flags]",
		"Runs one point of a scenario (default: soak, 10 minutes at 1000 qps through both sidecars in mTLS) and samples\n"+
			"each sidecar's resident memory every -interval: a leak shows as a slope. The flags override the scenario's values.")
	var interval time.Duration
	durationVar(cmd.flags, &interval, "interval", lab.SoakInterval, "how often to sample the sidecars' memory")
	cfg, err := parseLabRun(cmd, args, stdout, labRunOptions{defaultScenario: "soak", scenarioFlags: overrideFlags, ztunnel: true,
		check: func(s *scenario.Scenario) error { return lab.CheckSoak(s, interval) }})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	ctx, stop := labContext(stderr)
	defer stop()
	cfg.Out, cfg.Progress, cfg.ProgressTTY = stdout, stdout, isTerminal(stdout)
	rep, err := lab.Soak(ctx, cfg, interval)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	rep.Print(stdout)
	if rep.Outcome.Run.Failed || rep.Outcome.Run.Errors > 0 || ctx.Err() != nil {
		return exitFailed
	}
	return exitOK
}

// labRunOptions say what a command running the lab takes beyond the
// flags every such command has (-out, -db, -proxy, -network, -keep,
// -labels).
type labRunOptions struct {
	// defaultScenario runs without a scenario argument; with fixed, no
	// argument is taken at all (a command for one scenario).
	defaultScenario string
	fixed           bool
	// scenarioFlags registers the flags that override the scenario's
	// values (overrideFlags: all of them).
	scenarioFlags func(fs *flag.FlagSet, o *scenario.Overrides)
	// check, when given, says what else the command cannot take in the
	// scenario.
	check func(*scenario.Scenario) error
	// prometheus adds --prometheus and --prom-interval, ztunnel -ztunnel,
	// publish (when given) the dashboard's flags.
	prometheus, ztunnel bool
	publish             *publishFlags
	// kube, when given, lets --kube run the scenario on a cluster, which
	// takes neither this machine's network nor its binaries.
	kube *kubeFlags
}

// parseLabRun turns arguments into a lab configuration, checking all of it
// (scenario, flags, binaries, network) before anything starts. Its errors
// are all bad input.
func parseLabRun(cmd *command, args []string, stdout io.Writer, opts labRunOptions) (lab.Config, error) {
	var f labRunFlags
	var o scenario.Overrides
	fs := cmd.flags
	if opts.prometheus {
		fs.BoolVar(&f.prometheus, "prometheus", false, "run Debian's prometheus scraping the control plane and every proxy for the run, and store each proxy's figures from it with each run")
		durationVar(fs, &f.promInterval, "prom-interval", time.Second, "--prometheus: scrape interval")
	}
	publish := opts.publish
	if publish != nil {
		publish.define(fs)
	}
	fs.StringVar(&f.out, "out", "", "output `dir` (default results/lab/<runid>)")
	fs.StringVar(&f.db, "db", filepath.Join("results", "meshperf.db"), "results database: a `path` or a postgres:// URL")
	fs.StringVar(&f.proxy, "proxy", "", "meshperf-proxy `binary` (default: beside meshperf, then proxy/target/release, then $PATH)")
	fs.StringVar(&f.network, "network", "auto", "pod network: netns, loopback or auto (netns when root)")
	fs.BoolVar(&f.keep, "keep", false, "leave pods and processes up at the end, for debugging")
	fs.StringVar(&f.labels, "labels", "", "labels recorded with every run (e.g. \"before the fix\"); compare and history select runs by them")
	if opts.ztunnel {
		fs.StringVar(&f.ztunnel, "ztunnel", "", "measure this ztunnel `binary` beside meshperf's node proxy: each ambient mode also runs as its -ztunnel twin")
	}
	opts.scenarioFlags(fs, &o)
	rest, err := cmd.parse(args, stdout)
	if err != nil {
		return lab.Config{}, err
	}
	switch {
	case opts.fixed && len(rest) > 0:
		return lab.Config{}, usagef("no arguments, got %q (the scenario is %s)", rest, opts.defaultScenario)
	case len(rest) > 1:
		return lab.Config{}, usagef("one scenario at a time, got %q", rest)
	}
	if publish != nil {
		if err := publish.check(); err != nil {
			return lab.Config{}, usageError{err.Error()}
		}
	}
	name := opts.defaultScenario
	if len(rest) == 1 {
		name = rest[0]
	}
	s, err := scenario.Load(name)
	if err != nil {
		return lab.Config{}, inputError{err}
	}
	if s, err = s.Apply(o); err != nil {
		return lab.Config{}, inputError{err}
	}
	if opts.check != nil {
		if err := opts.check(s); err != nil {
			return lab.Config{}, inputError{err}
		}
	}
	if f.ztunnel != "" {
		s.WithZtunnelTwins()
	}
	if opts.kube != nil {
		if err := opts.kube.checkOnlyWithKube(fs); err != nil {
			return lab.Config{}, err
		}
	}
	if opts.kube != nil && opts.kube.on {
		if err := opts.kube.check(s, f); err != nil {
			return lab.Config{}, err
		}
		return lab.Config{Scenario: s, OutDir: f.out, DBPath: f.db, Keep: f.keep, Labels: f.labels}, nil
	}
	cfg := lab.Config{Scenario: s, OutDir: f.out, DBPath: f.db, Keep: f.keep, ZtunnelBin: f.ztunnel, Labels: f.labels,
		Prometheus: f.prometheus, PromInterval: f.promInterval}
	if cfg.Network, err = labNetwork(f.network); err != nil {
		return cfg, usageError{err.Error()}
	}
	if err := lab.Preflight(cfg); err != nil {
		return cfg, inputError{err}
	}
	if cfg.MeshperfBin, err = os.Executable(); err != nil {
		return cfg, fmt.Errorf("find the meshperf binary: %w", err)
	}
	if cfg.ProxyBin, err = findProxy(f.proxy, cfg.MeshperfBin); err != nil {
		return cfg, inputError{err}
	}
	return cfg, nil
}

// overrideFlags registers the scenario's flags; each sets its override
// only when given, so the scenario's value stands otherwise.
func overrideFlags(fs *flag.FlagSet, o *scenario.Overrides) {
	intList := func(name, usage string, dst *[]int) {
		fs.Func(name, usage, func(v string) (err error) { *dst, err = scenario.ParseIntList("-"+name, v); return err })
	}
	intList("conn", "connection `counts`, e.g. 2,4,8", &o.Connections)
	intList("qps", "request `rates`, e.g. 500,1000 (0: as fast as possible)", &o.QPS)
	shapeFlags(fs, o)
	wholeNumberFlag(fs, "repetitions", "`times` to repeat the matrix", &o.Repetitions)
}

// shapeFlags registers the scenario's flags other than its connection
// counts and rates, which a sweep takes its own way.
func shapeFlags(fs *flag.FlagSet, o *scenario.Overrides) {
	fs.Func("modes", "`modes`: no-mesh,server-sidecar,client-sidecar,both-sidecars,ambient,ambient-waypoint", func(v string) (err error) {
		o.Modes, err = scenario.ParseModes("-modes", v)
		return err
	})
	durFlag := func(name, usage string, dst **time.Duration) {
		fs.Func(name, usage, func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("not a duration (e.g. 30s)")
			}
			*dst = &d
			return nil
		})
	}
	durFlag("duration", "each run's load `time`, warm-up included", &o.Duration)
	durFlag("warmup", "`time` left out of CPU/memory sampling", &o.Warmup)
	wholeNumberFlag(fs, "size", "response payload `bytes`", &o.PayloadSize)
	wholeNumberFlag(fs, "concurrency", "sidecar worker `threads`", &o.ProxyConcurrency)
	fs.Func("proxy-cpu-limit", "cap each proxy's CPU at `cpus` (500m or 0.5), as Istio's sidecar.istio.io/proxyCPULimit; needs root", func(v string) error {
		cpus, err := scenario.ParseCPU(v)
		o.ProxyCPULimit = &cpus
		return err
	})
	fs.Func("protocol", "`protocol`: http, h2, grpc or tcp", func(v string) error {
		p, err := scenario.ParseProtocol("-protocol", v)
		o.Protocol = &p
		return err
	})
	boolFlag := func(name, usage string, dst **bool) {
		fs.BoolFunc(name, usage, func(v string) error {
			b, ok := map[string]bool{"true": true, "1": true, "false": false, "0": false}[v]
			if !ok {
				return fmt.Errorf("want true or false")
			}
			*dst = &b
			return nil
		})
	}
	boolFlag("mtls", "mutual TLS between sidecars (-mtls=false to turn off)", &o.MTLS)
	boolFlag("access-log", "sidecar access logs", &o.AccessLog)
}

// wholeNumberFlag registers an override that is set only when given.
func wholeNumberFlag(fs *flag.FlagSet, name, usage string, dst **int) {
	fs.Func(name, usage, func(v string) error {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil {
			return fmt.Errorf("not a whole number")
		}
		*dst = &n
		return nil
	})
}

func labNetwork(v string) (pod.Kind, error) {
	switch v {
	case "auto", "":
		return "", nil
	case "loopback":
		return pod.KindLoopback, nil
	case "netns":
		if os.Geteuid() != 0 {
			return "", errors.New("-network netns needs root (network namespaces and iptables); use -network loopback")
		}
		return pod.KindNetns, nil
	}
	return "", fmt.Errorf("-network %q: want netns, loopback or auto", v)
}

// findProxy resolves the sidecar binary: the flag, then beside meshperf,
// then the Cargo release build under the working directory, then $PATH.
func findProxy(flagValue, meshperfBin string) (string, error) {
	const name = "meshperf-proxy"
	if flagValue != "" {
		if st, err := os.Stat(flagValue); err != nil || st.IsDir() {
			return "", fmt.Errorf("-proxy %s: not a file", flagValue)
		}
		return flagValue, nil
	}
	for _, p := range []string{filepath.Join(filepath.Dir(meshperfBin), name), filepath.Join("proxy", "target", "release", name)} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return filepath.Abs(p)
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", errors.New("meshperf-proxy not found beside meshperf, in proxy/target/release or on $PATH: build it (cd proxy && cargo build --release) or pass -proxy PATH")
}
