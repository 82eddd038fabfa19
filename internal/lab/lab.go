// Package lab runs a scenario's matrix the way Istio's synthetic benchmark
// does, on this machine: a client pod running the load generator and a
// server pod running the echo server, with no sidecar, a server sidecar
// only, a client sidecar only, or both, configured by meshperf's control
// plane. Each run's latency comes from the load generator's Fortio JSON;
// each process's CPU and memory from /proc over the steady window after
// warm-up; and the sidecars' own metrics confirm that the traffic really
// went through every sidecar the mode claims (and, with mTLS, that the
// server sidecar saw the client's identity). Results go to a CSV, an HTML
// report, the SQLite store and the terminal.
//
// Pods are network namespaces with Istio's iptables capture when running as
// root; otherwise loopback addresses with explicit sidecar listeners, which
// every result records.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// Config is one invocation of the lab.
type Config struct {
	Scenario *scenario.Scenario
	// MeshperfBin runs the control plane, the echo server and the load
	// generator (`meshperf pilot|server|load`).
	MeshperfBin string
	// ProxyBin is meshperf-proxy: the sidecar, and the ambient modes' node
	// proxy (--proxy-type ztunnel).
	ProxyBin string
	// ZtunnelBin is a ztunnel binary, configured as meshperf-proxy is: the
	// node proxy of the ztunnel modes (ambient-ztunnel,
	// ambient-waypoint-ztunnel), which need it.
	ZtunnelBin string
	// ZtunnelNode, when set, also runs ZtunnelBin on that one node
	// (NodeClient or NodeServer) in the other ambient modes, beside
	// meshperf-proxy on the other node: the interoperability test.
	ZtunnelNode string
	// Network is the pod network kind; empty picks netns as root, else
	// loopback.
	Network pod.Kind
	// RunID names the invocation (1-6 of [a-z0-9]); empty generates one.
	RunID string
	// OutDir receives the JSON results, CSV, HTML report and logs; empty
	// means results/lab/<runid>.
	OutDir string
	// DBPath is the results store; empty skips the store.
	DBPath string
	// Labels are the user's labels for every run of the invocation
	// (Fortio's -labels), recorded in their provenance.
	Labels string
	// Keep leaves pods and processes up at the end, for debugging.
	Keep bool
	// Prometheus runs Debian's prometheus for the invocation, scraping the
	// control plane and every proxy every PromInterval (1s if zero), and
	// stores each proxy's figures over each run's window with the run.
	Prometheus   bool
	PromInterval time.Duration
	// Out receives notices, per-run lines and the summary; Progress the
	// progress line (a live line when ProgressTTY). Nil discards.
	Out         io.Writer
	Progress    io.Writer
	ProgressTTY bool
	// Live receives the matrix's progress for the dashboard: which run
	// starts, and each run's result; nil publishes nothing.
	Live LivePublisher
	// LoadDashboard, when its URL is set, makes each run's load generator
	// publish its own progress (rate, percentiles) into the lab's session.
	LoadDashboard LoadDashboard

	// hook lets tests act at points of the run (kill a process mid-run).
	hook func(event string, l *lab, spec scenario.RunSpec)
}

// LoadDashboard is where the load generators publish: the dashboard, its
// token (passed in the environment, not on a command line anyone can
// read) and the lab's live session.
type LoadDashboard struct {
	URL, Token, Session string
}

// Check is one confirmation that a run's traffic went where its mode says.
type Check struct {
	Name   string // e.g. "server sidecar mTLS"
	OK     bool
	Detail string // what was seen, e.g. "2002 requests, want >= 2000"
}

// Outcome is one run: its record and its checks.
type Outcome struct {
	Run    results.Run
	Checks []Check
}

// Report is what an invocation did.
type Report struct {
	RunID      string
	Network    pod.Kind
	OutDir     string
	CSV, HTML  string // files written
	DB         string // store written (a URL without its password), "" if none
	Outcomes   []Outcome
	NamePrefix string // prefix of every namespace and link the run created
	PIDs       []int  // every process the lab started
	Wall       time.Duration
	// NodeProxies say what ran as each node proxy, e.g. "client node proxy
	// (node-1): ztunnel 1.24.0"; empty without an ambient mode.
	NodeProxies []string
	// Cluster names the Kubernetes cluster the runs were on (lab run
	// --kube); "" on this machine's pods.
	Cluster string
	// Sweep is a capacity sweep's analysis (lab sweep); nil for a matrix.
	Sweep *results.Sweep
	// BaselineNotMet says a sweep's baseline (no-mesh) missed the
	// objectives even at the lowest rate, which ended the sweep: no mode
	// through a mesh can meet them.
	BaselineNotMet bool
}

// Runs are the outcomes' records.
func (r *Report) Runs() []results.Run {
	out := make([]results.Run, len(r.Outcomes))
	for i, o := range r.Outcomes {
		out[i] = o.Run
	}
	return out
}

// Run executes the scenario's matrix. It returns an error only when the
// lab could not start (bad binaries, no network, no control plane) or the
// outputs could not be written; failed runs are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return invoke(ctx, cfg, func(ctx context.Context, l *lab, store *results.Store, rep *Report) {
		rep.Outcomes = l.runMatrix(ctx, store)
	})
}

// invoke is one invocation of the lab around body, which runs the
// measurements (the matrix, a sweep) into rep: it sets the lab up, opens
// the store, and after body writes the outputs and tears everything down.
// Its error is the lab's not starting or the outputs' not being written.
func invoke(ctx context.Context, cfg Config, body func(context.Context, *lab, *results.Store, *Report)) (*Report, error) {
	start := time.Now()
	if cfg.Scenario == nil {
		return nil, errors.New("lab: no scenario")
	}
	l, err := newLab(cfg)
	if err != nil {
		return nil, err
	}
	cfg = l.cfg
	rep := &Report{RunID: cfg.RunID, OutDir: cfg.OutDir}
	store, err := OpenStore(cfg.DBPath)
	if err != nil {
		return nil, err
	}
	if store != nil {
		defer store.Close()
		rep.DB = store.String()
	}
	err = l.start(ctx)
	rep.Network, rep.NamePrefix = l.kind(), l.namePrefix()
	defer func() {
		rep.PIDs = l.pids
		l.finish()
	}()
	if err == nil && cfg.Prometheus {
		err = l.startPrometheus(ctx)
	}
	if err != nil {
		return rep, err
	}
	if stop := l.relayDashboard(); stop != nil {
		defer stop()
	}
	body(ctx, l, store, rep)
	rep.PIDs = l.pids
	for _, n := range l.nodes {
		if n.binary != "" {
			rep.NodeProxies = append(rep.NodeProxies, fmt.Sprintf("%s (%s): %s", n.role, n.name, n.binary))
		}
	}
	rep.Wall = time.Since(start)
	if err := WriteOutputs(rep, cfg.Out); err != nil {
		return rep, err
	}
	return rep, nil
}

// newLab checks cfg's binaries, fills in its defaults and creates the
// output and log directories: everything short of starting the network.
func newLab(cfg Config) (*lab, error) {
	if err := Preflight(cfg); err != nil {
		return nil, err
	}
	for _, b := range []struct{ what, path string }{{"meshperf", cfg.MeshperfBin}, {"meshperf-proxy", cfg.ProxyBin}} {
		if st, err := os.Stat(b.path); err != nil || st.IsDir() {
			return nil, fmt.Errorf("lab: %s binary %q not found", b.what, b.path)
		}
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.RunID == "" {
		cfg.RunID = pod.NewRunID()
	}
	if cfg.PromInterval <= 0 {
		cfg.PromInterval = time.Second
	}
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join("results", "lab", cfg.RunID)
	}
	prov, err := newLabProvenance(cfg)
	if err != nil {
		return nil, err
	}
	l := &lab{cfg: cfg, logDir: filepath.Join(cfg.OutDir, "logs"), prov: prov}
	if err := os.MkdirAll(l.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab: output directory: %w", err)
	}
	return l, nil
}

// relayDashboard gives pods in network namespaces a way to the dashboard
// (a relay on a socket file); the loopback network's pods reach it as
// they are. It returns what stops the relay, nil when none was started.
func (l *lab) relayDashboard() (stop func()) {
	l.loadDashboardURL = l.cfg.LoadDashboard.URL
	if l.loadDashboardURL == "" || l.kind() == pod.KindLoopback {
		return nil
	}
	r, err := live.StartRelay(l.loadDashboardURL)
	if err != nil {
		// Progress is a nicety: the runs go on without it.
		l.logf("meshperf lab: %v; the load runs will not publish their progress", err)
		l.loadDashboardURL = ""
		return nil
	}
	l.loadDashboardURL = r.URL()
	return func() { _ = r.Close() }
}

// finish removes everything the lab started, or with -keep says what was
// left up.
func (l *lab) finish() {
	if l.cfg.Keep {
		l.keepNotice()
		return
	}
	if err := l.close(); err != nil {
		fmt.Fprintf(l.cfg.Out, "meshperf lab: cleanup: %v (meshperf lab clean removes leftovers)\n", err)
	}
}

// OpenStore opens the results store at path (creating a file's directory);
// nil without a path.
func OpenStore(path string) (*results.Store, error) {
	if path == "" {
		return nil, nil
	}
	if loc, err := results.ParseLocation(path); err == nil && loc.IsFile() {
		if err := os.MkdirAll(filepath.Dir(loc.File), 0o755); err != nil {
			return nil, fmt.Errorf("lab: results database directory: %w", err)
		}
	}
	s, err := results.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return s, nil
}
