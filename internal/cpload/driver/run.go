// Package driver runs control-plane load tests: it starts meshperf pilot (or
// uses any ADS server given its address), loads a generated mesh into it,
// connects simulated sidecars, churns config, and measures what the
// control plane did (push counts, its own convergence histogram, CPU and
// memory) and what the proxies saw (end-to-end times, config size). Lab
// runs Istio in Action chapter 11's tuning sequence with it.
package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
)

// Knobs are the control plane's tuning variables, passed to the pilot
// subprocess as istiod's environment variables; zero leaves its default.
type Knobs struct {
	DebounceAfter        time.Duration
	DebounceMax          time.Duration
	PushThrottle         int
	MaxRequestsPerSecond float64
}

// MarshalJSON writes the durations as istiod's variables take them ("2.5s"),
// not as nanoseconds, so that a stored report reads as the run was set up.
func (k Knobs) MarshalJSON() ([]byte, error) {
	type knobsJSON struct {
		DebounceAfter        string  `json:"debounceAfter,omitempty"`
		DebounceMax          string  `json:"debounceMax,omitempty"`
		PushThrottle         int     `json:"pushThrottle,omitempty"`
		MaxRequestsPerSecond float64 `json:"maxRequestsPerSecond,omitempty"`
	}
	out := knobsJSON{PushThrottle: k.PushThrottle, MaxRequestsPerSecond: k.MaxRequestsPerSecond}
	if k.DebounceAfter > 0 {
		out.DebounceAfter = k.DebounceAfter.String()
	}
	if k.DebounceMax > 0 {
		out.DebounceMax = k.DebounceMax.String()
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote (cpload merge reads reports).
func (k *Knobs) UnmarshalJSON(b []byte) error {
	var in struct {
		DebounceAfter        string  `json:"debounceAfter"`
		DebounceMax          string  `json:"debounceMax"`
		PushThrottle         int     `json:"pushThrottle"`
		MaxRequestsPerSecond float64 `json:"maxRequestsPerSecond"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*k = Knobs{PushThrottle: in.PushThrottle, MaxRequestsPerSecond: in.MaxRequestsPerSecond}
	for _, d := range []struct {
		s   string
		out *time.Duration
	}{{in.DebounceAfter, &k.DebounceAfter}, {in.DebounceMax, &k.DebounceMax}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return fmt.Errorf("knobs: %w", err)
		}
		*d.out = v
	}
	return nil
}

func (k Knobs) env() []string {
	var out []string
	if k.DebounceAfter > 0 {
		out = append(out, "PILOT_DEBOUNCE_AFTER="+k.DebounceAfter.String())
	}
	if k.DebounceMax > 0 {
		out = append(out, "PILOT_DEBOUNCE_MAX="+k.DebounceMax.String())
	}
	if k.PushThrottle > 0 {
		out = append(out, "PILOT_PUSH_THROTTLE="+strconv.Itoa(k.PushThrottle))
	}
	if k.MaxRequestsPerSecond > 0 {
		out = append(out, "PILOT_MAX_REQUESTS_PER_SECOND="+strconv.FormatFloat(k.MaxRequestsPerSecond, 'g', -1, 64))
	}
	return out
}

// Churn kinds.
const (
	ChurnPerfTest  = "perftest"
	ChurnEndpoints = "endpoints"
	ChurnConfig    = "config"
	ChurnNone      = "none"
)

// Config is one load test.
type Config struct {
	Name  string      // label in reports and the store
	Shape string      // the shape's name, for the report
	Mesh  *shape.Mesh // what to load and whose pods to simulate
	// Proxies simulates only this many of the mesh's pods (0: all).
	Proxies int
	// Shard simulates only this process's part of those proxies; shard 1
	// alone loads the mesh and makes the changes (shard.go).
	Shard   Shard
	Scoping Scoping
	// Exclude are namespaces labelled istio-exclude=true under the book's
	// discoverySelectors (created if the mesh lacks them).
	Exclude []string
	Knobs   Knobs
	Delta   bool
	// NoSDS subscribes to no secrets: against istiod, which leaves SDS to
	// istio-agent, a sidecar's secrets never come over ADS.
	NoSDS bool

	Churn     string        // perftest, endpoints, config or none
	Namespace string        // where changes are made
	Service   string        // endpoint churn's service
	Reps      int           // perftest repetitions
	Delay     time.Duration // perftest delay between repetitions
	Rate      float64       // endpoints/config changes per second
	Duration  time.Duration // endpoints/config: for how long

	// Kube runs the test on a Kubernetes API server (kube.go): nil runs
	// it on meshperf pilot's own store.
	Kube *KubeOptions

	// Target is an existing ADS server; empty starts meshperf pilot.
	Target string
	// MeshName and MeshVersion name an external Target's control plane
	// (istiod, 1.24.0) for the results' provenance; meshperf cannot ask it.
	MeshName, MeshVersion string
	// TargetPID is an external Target's process, when it runs on this
	// machine: its CPU and memory are sampled as meshperf pilot's are.
	TargetPID int
	// Subject names what a side-by-side benchmark measures in this run
	// (bench pilot: "meshperf-pilot", "istiod"); it is one of the
	// parameters, so that each subject's runs are their own series.
	Subject string
	// Labels are the user's labels for the run, recorded in its provenance.
	Labels string
	// ApplyWith is how changes reach an external target: "none",
	// "meshperf-api" (APIURL), or "dir:PATH" (files in the directory it
	// watches, as istiod's --configDir).
	ApplyWith string
	APIURL    string
	// APIToken is the token of the API at APIURL ("" for none).
	APIToken   string
	MetricsURL string // an external target's /metrics, optional

	Prometheus   bool          // run Debian's prometheus for the test
	PromURL      string        // or use this one
	PromInterval time.Duration // scrape interval of the started one

	PilotCommand   []string // how to run meshperf pilot (tests)
	DataDir        string   // pilot's store; a temporary directory if empty
	ConnectRate    float64  // new proxy streams per second (sim default if 0)
	ProxiesPerConn int
	Timeout        time.Duration // per wait (connect, each delivery); 60s if 0
	Progress       io.Writer     // one line per stage; nil for quiet
}

func (c *Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return time.Minute
	}
	return c.Timeout
}

func (c *Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "cpload: "+format+"\n", args...)
	}
}

// Validate says what is wrong with c, in one line.
func (c *Config) Validate() error {
	switch {
	case c.Mesh == nil || len(c.Mesh.Proxies) == 0:
		return errors.New("no mesh, or a mesh without pods to simulate")
	case c.Target != "" && c.ApplyWith != "none" && c.ApplyWith != "meshperf-api" && !strings.HasPrefix(c.ApplyWith, "dir:"):
		return fmt.Errorf("--apply-with %q: against --target, want none, meshperf-api or dir:PATH", c.ApplyWith)
	case strings.HasPrefix(c.ApplyWith, "dir:") && !isDir(strings.TrimPrefix(c.ApplyWith, "dir:")):
		return fmt.Errorf("--apply-with %q: no such directory", c.ApplyWith)
	case c.Target != "" && c.ApplyWith == "meshperf-api" && c.APIURL == "":
		return errors.New("--apply-with meshperf-api needs --api-url (the control plane's --httpAddr)")
	case c.Target != "" && c.Prometheus && c.MetricsURL == "":
		return errors.New("--prometheus against --target needs --metrics-url (what Prometheus should scrape)")
	case c.Target == "" && (c.MeshName != "" || c.MeshVersion != ""):
		return errors.New("--mesh-name and --mesh-version name an external control plane: give them with --target (meshperf pilot names itself)")
	case c.MeshVersion != "" && c.MeshName == "":
		return errors.New("--mesh-version needs --mesh-name (the control plane it is the version of)")
	}
	switch c.Churn {
	case ChurnNone, "":
	case ChurnPerfTest:
		if c.Reps <= 0 {
			return errors.New("--reps must be positive")
		}
	case ChurnEndpoints, ChurnConfig:
		if c.Rate <= 0 || c.Duration <= 0 {
			return errors.New("--rate and --duration must be positive for endpoint and config churn")
		}
	default:
		return fmt.Errorf("--churn %q: want perftest, endpoints, config or none", c.Churn)
	}
	if c.Kube != nil {
		switch {
		case c.Target != "":
			return errors.New("--kube starts meshperf pilot on the API server: not with --target")
		case len(c.Exclude) > 0 || (c.Scoping != ScopeNone && c.Scoping != ""):
			return errors.New("--kube: no --sidecar or --discovery-selectors so far")
		}
		if err := CheckKubeInput(c.Kube, len(c.Mesh.Proxies)); err != nil {
			return err
		}
	}
	if err := c.validateShard(); err != nil {
		return err
	}
	if c.Target != "" && c.ApplyWith == "none" && c.Churn != ChurnNone && c.Churn != "" && c.Shard.first() {
		return errors.New("--churn needs a way to change config: --apply-with meshperf-api or dir:PATH, or --churn none")
	}
	return nil
}

// applier changes the control plane's config: through meshperf pilot's API,
// or by files in a watched directory (istiod's --configDir).
type applier interface {
	Apply(ctx context.Context, rs []*config.Resource) error
	Delete(ctx context.Context, rs []*config.Resource) error
	ConfigDumpBytes(ctx context.Context, proxyID string) int64
}

// env is the control plane under test and the ways to reach it.
type env struct {
	pilot      *proc.Pilot
	xds        string
	api        applier // nil: config cannot be changed
	metricsURL string
	prom       *metrics.PromClient
	promServer *metrics.PromServer
	sampler    *procstat.Sampler
	stopSample context.CancelFunc
	// controlPlaneSampled says the sampler's first process is the control
	// plane; cpload itself is always sampled, last, to tell the
	// simulator's cost from the control plane's.
	controlPlaneSampled bool
	tmp                 string
}

// startEnv starts meshperf pilot (unless c.Target), the procstat sampler on
// it, and Prometheus when asked.
func startEnv(ctx context.Context, c *Config, dataDir, meshConfig string) (*env, error) {
	e := &env{sampler: procstat.NewSampler(200 * time.Millisecond)}
	if c.Target == "" {
		p, err := startPilot(ctx, c.PilotCommand, dataDir, meshConfig, c.Knobs.env(), c.Kube == nil)
		if err != nil {
			return nil, err
		}
		e.pilot, e.xds, e.metricsURL = p, p.Addrs.GRPC, p.MetricsURL()
		c, err := p.APIClient()
		if err != nil {
			e.stop()
			return nil, err
		}
		e.api = apiApplier{c}
		e.sampleProcess("pilot", p.PID())
	} else {
		e.xds, e.metricsURL = c.Target, c.MetricsURL
		if c.TargetPID > 0 {
			e.sampleProcess(c.Target, c.TargetPID)
		}
		switch {
		case c.ApplyWith == "meshperf-api":
			client, err := api.NewClient(c.APIURL, nil, api.WithToken(c.APIToken))
			if err != nil {
				return nil, fmt.Errorf("--api-url: %w", err)
			}
			e.api = apiApplier{client}
		case strings.HasPrefix(c.ApplyWith, "dir:"):
			e.api = &DirApplier{Dir: strings.TrimPrefix(c.ApplyWith, "dir:")}
		}
	}
	e.sampleSelf()
	switch {
	case c.Prometheus:
		dir, err := os.MkdirTemp("", "meshperf-prometheus-")
		if err != nil {
			e.stop()
			return nil, err
		}
		e.tmp = dir
		target := hostPort(e.metricsURL)
		s, err := metrics.StartPrometheus(ctx, metrics.PromServerOptions{Targets: []metrics.ScrapeTarget{{Job: metrics.ScrapeJob, Address: target}}, Interval: c.PromInterval, Dir: dir})
		if err != nil {
			e.stop()
			return nil, err
		}
		e.promServer, e.prom = s, s.PromClient
		// Prometheus holds back its first scrape for a few seconds after
		// start; the test's opening figures need one.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = s.WaitScrapedAfter(wctx, metrics.ScrapeJob, time.Time{})
		cancel()
		if err != nil {
			e.stop()
			return nil, err
		}
	case c.PromURL != "":
		pc, err := metrics.NewPromClient(c.PromURL)
		if err != nil {
			e.stop()
			return nil, err
		}
		e.prom = pc
	}
	return e, nil
}

// sampleProcess samples the control plane's CPU and memory for the report.
func (e *env) sampleProcess(name string, pid int) {
	e.controlPlaneSampled = e.sampler.Add(name, pid) == nil
}

// sampleSelf adds cpload's own process to the sampler, after the control
// plane, and starts sampling.
func (e *env) sampleSelf() {
	_ = e.sampler.Add(simulatorName, os.Getpid())
	sctx, cancel := context.WithCancel(context.Background())
	e.stopSample = cancel
	go e.sampler.Run(sctx)
}

func (e *env) stop() {
	e.promServer.Stop()
	if e.stopSample != nil {
		e.stopSample()
	}
	if e.pilot != nil {
		_ = e.pilot.Stop()
	}
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// Run runs one load test: control plane, mesh, proxies, churn, figures.
func Run(ctx context.Context, c Config) (_ *Report, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.admitTheFleet()
	dataDir := c.DataDir
	if dataDir == "" && c.Target == "" {
		dir, err := os.MkdirTemp("", "meshperf-cpload-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		dataDir = dir
	}
	meshConfig := ""
	if len(c.Exclude) > 0 {
		meshConfig = DiscoverySelectorsMeshConfig
	}
	var kubeFigures *KubeFigures
	var kubeChurn applier
	if c.Kube != nil {
		k, m, kf, err := startKube(ctx, &c)
		if err != nil {
			return nil, err
		}
		defer func() {
			k.keepLogs = k.keepLogs || err != nil
			k.stop()
		}()
		c.Mesh, kubeFigures = m, kf
		if kubeChurn, err = k.applier(); err != nil {
			return nil, err
		}
		if c.Kube.Istiod != "" {
			ki, err := k.startIstiod(ctx, &c)
			if err != nil {
				return nil, err
			}
			defer ki.stop()
		} else {
			command, err := PilotCommand(c.PilotCommand)
			if err != nil {
				return nil, err
			}
			c.PilotCommand = append(command, "--kubeconfig", c.Kube.Kubeconfig, "--install-crds")
		}
	}
	e, err := startEnv(ctx, &c, dataDir, meshConfig)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	if c.Kube != nil {
		// The mesh is on the API server, and so are its changes: neither
		// the pilot's API nor a config directory is the source.
		e.api = kubeChurn
	}
	if !c.Shard.first() {
		// Shard 1 loads the mesh and makes the changes; the others only
		// connect their part of the fleet.
		e.api = nil
	}
	if e.api != nil && c.Kube == nil {
		rs := append(c.Mesh.All(), scopeResources(c.Mesh, c.Scoping)...)
		for _, ns := range c.Exclude {
			rs = append(rs, excludedNamespace(ns))
		}
		if c.Shard.split() {
			rs = append(rs, shardsReadyMarker(c.Namespace))
		}
		c.progress("applying the mesh: %d resources", len(rs))
		if err := e.api.Apply(ctx, rs); err != nil {
			return nil, fmt.Errorf("loading the mesh: %w", err)
		}
		if dir, ok := e.api.(*DirApplier); ok {
			if err := c.awaitDirLoaded(ctx, e, dir); err != nil {
				return nil, err
			}
		}
	}
	r, err := runStep(ctx, &c, e)
	if r != nil {
		r.Kube = kubeFigures
	}
	return r, err
}

// admitTheFleet sets the stream limit (PILOT_MAX_REQUESTS_PER_SECOND) of
// a control plane cpload starts to the rate the fleet opens streams at,
// unless the user set it: the run measures how the control plane
// configures proxies, and its automatic limit (about 25 new streams a
// second on 2 cores, as istiod's) would turn away most of a fleet that
// connects faster, so that the sync time measured the limiter's queue and
// the proxies' back-off. The report and provenance carry the value.
func (c *Config) admitTheFleet() {
	if c.Target != "" || c.Knobs.MaxRequestsPerSecond != 0 {
		return
	}
	switch {
	case c.ConnectRate > 0:
		c.Knobs.MaxRequestsPerSecond = c.ConnectRate
	case c.ConnectRate < 0: // all at once: admit them all within a second
		c.Knobs.MaxRequestsPerSecond = float64(len(c.Mesh.Proxies))
	default:
		c.Knobs.MaxRequestsPerSecond = sim.DefaultConnectRate
	}
}

// changes builds the churn's changes.
func (c *Config) changes(specs []sim.ProxySpec) []churn.Change {
	who := audience(specs, c.Scoping, c.Exclude)
	n := int(c.Rate * c.Duration.Seconds())
	switch c.Churn {
	case ChurnPerfTest:
		return churn.PerfTest(c.Namespace, c.Reps, who)
	case ChurnConfig:
		return churn.ConfigChurn(c.Namespace, max(n, 1), who)
	case ChurnEndpoints:
		return churn.EndpointChurn(c.Namespace, c.Service, max(n, 1), who)
	}
	return nil
}

// cleanup is what the churn left behind, deleted after a step so that the
// next one starts from the same mesh.
func (c *Config) cleanup() []*config.Resource {
	var out []*config.Resource
	switch c.Churn {
	case ChurnPerfTest:
		out = churn.PerfTestCleanup(c.Namespace, c.Reps)
	case ChurnConfig:
		out = []*config.Resource{churn.ChurnServiceEntry(c.Namespace, "x.invalid")}
	}
	if c.Shard.split() {
		out = append(out, shardsReadyMarker(c.Namespace))
	}
	return out
}

func hostPort(u string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			u = u[len(p):]
		}
	}
	for i := range len(u) {
		if u[i] == '/' {
			return u[:i]
		}
	}
	return u
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
