package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/kube/kwok"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/results"
)

// Cpload is `meshperf cpload run|scale|lab`: the control-plane load test.
func Cpload(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return runCpload(ctx, args, stdout, stderr, nil)
	}, args, stdout, stderr)
}

// runCpload dispatches; pilotCommand (tests) replaces how pilot is run.
func runCpload(ctx context.Context, args []string, stdout, stderr io.Writer, pilotCommand []string) int {
	cpload := commandGroup{
		name:  "meshperf cpload",
		about: "Load-tests a control plane with simulated sidecars.",
		subs: []subcommand{
			{name: "run", about: "one load test: shape x churn x knobs against meshperf pilot or --target",
				run: func(args []string) int { return cploadRun(ctx, args, stdout, stderr, pilotCommand) }},
			{name: "scale", about: "one shape at growing sizes: cost per proxy and per service, and how it grows",
				run: func(args []string) int { return cploadScale(ctx, args, stdout, stderr, pilotCommand) }},
			{name: "lab", about: "Istio in Action chapter 11's tuning sequence, beside the book's figures",
				run: func(args []string) int { return cploadLab(ctx, args, stdout, stderr, pilotCommand) }},
			{name: "merge", about: "one report of a fleet's shards (cpload run -shard I/N), from their --json reports",
				run: func(args []string) int { return cploadMerge(args, stdout, stderr) }},
		},
	}
	return cpload.run(args, stdout, stderr)
}

// cploadRunFlags are cpload run's flags.
type cploadRunFlags struct {
	shape, form                        string
	namespaces, services, replicas     int
	proxies                            int
	churn, namespace, service          string
	reps                               int
	delay, duration                    time.Duration
	rate                               float64
	sidecar, excludeNS                 string
	delta, sotw, noSDS                 bool
	knobs                              driver.Knobs
	target, applyWith, apiURL, metrics string
	apiToken                           string
	prometheus                         bool
	promURL                            string
	promInterval                       time.Duration
	connectRate                        float64
	perConn                            int
	timeout                            time.Duration
	jsonOut, db, name                  string
	meshName, meshVersion, labels      string
	kube                               bool
	kubeconfig, kwokCIDR, istiod       string
	shard                              string // cpload run only
}

func (f *cploadRunFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.shape, "shape", "booklab", "mesh `shape`: uniform, large (Istio's large load test), booklab (the book's lab mesh)")
	fs.StringVar(&f.form, "form", shape.FormServices, "how the shape's services and pods are written: services (Kubernetes Services; endpoints from the connected proxies) or serviceentries (a ServiceEntry per Service and a WorkloadEntry per pod, the kinds istiod's file mode reads: for --target istiod)")
	countVar(fs, &f.namespaces, "namespaces", 0, "namespaces (uniform: default 5; large: default 1)")
	countVar(fs, &f.services, "services", 0, "uniform: services per namespace (default 10)")
	countVar(fs, &f.replicas, "replicas", 0, "pods per service/deployment (uniform default 1, large default 2)")
	countVar(fs, &f.proxies, "proxies", 0, "simulate only `N` of the shape's pods, spread evenly (0: all)")
	fs.StringVar(&f.churn, "churn", "perftest", "churn: perftest (the book's performance-test.sh), endpoints, config, none")
	fs.StringVar(&f.namespace, "namespace", "", "namespace of the changes (default istioinaction for booklab, else the first)")
	fs.StringVar(&f.service, "service", "", "endpoint churn's service (default the namespace's first)")
	positiveVar(fs, &f.reps, "reps", 10, "perftest: repetitions")
	durationVar(fs, &f.delay, "delay", 2500*time.Millisecond, "perftest: wait between repetitions")
	rateVar(fs, &f.rate, "rate", 10, "endpoints/config: changes per second")
	durationVar(fs, &f.duration, "duration", 10*time.Second, "endpoints/config: how long to churn")
	fs.StringVar(&f.sidecar, "sidecar", "none", "Sidecar scoping: none, mesh-wide (the book's), namespace (one per namespace: ./* and istio-system/*)")
	fs.StringVar(&f.excludeNS, "discovery-selectors", "", "comma-separated namespaces to exclude with the book's discoverySelectors (labelled istio-exclude=true)")
	fs.BoolVar(&f.delta, "delta", false, "delta xDS")
	fs.BoolVar(&f.noSDS, "no-sds", false, "subscribe to no secrets (against istiod, whose sidecars get them from istio-agent; implied by --kube, where sidecars get them from the CA)")
	fs.BoolVar(&f.sotw, "sotw", false, "state-of-the-world xDS (the default)")
	durationVar(fs, &f.knobs.DebounceAfter, "debounce-after", 0, "PILOT_DEBOUNCE_AFTER for the pilot subprocess (its default 100ms)")
	durationVar(fs, &f.knobs.DebounceMax, "debounce-max", 0, "PILOT_DEBOUNCE_MAX (default 10s)")
	countVar(fs, &f.knobs.PushThrottle, "push-throttle", 0, "PILOT_PUSH_THROTTLE (default automatic)")
	rateVar(fs, &f.knobs.MaxRequestsPerSecond, "max-requests-per-second", 0, "PILOT_MAX_REQUESTS_PER_SECOND: new xDS streams per second (default automatic, about 25 on 2 cores)")
	addrVar(fs, &f.target, "target", "", optionalHostPort, "an existing ADS server `host:port` instead of starting meshperf pilot")
	fs.StringVar(&f.applyWith, "apply-with", "none", "with --target, how to change config: none, meshperf-api, or dir:PATH (YAML files in the directory the control plane watches, e.g. istiod's --configDir)")
	urlVar(fs, &f.apiURL, "api-url", "with --apply-with meshperf-api: the control plane's API `URL`")
	fs.StringVar(&f.apiToken, "api-token", "", "with --api-url: its `token` (default $"+api.TokenEnv+")")
	urlVar(fs, &f.metrics, "metrics-url", "with --target: its /metrics `URL`, for push counts, convergence, CPU and memory")
	fs.BoolVar(&f.prometheus, "prometheus", false, "run Debian's prometheus scraping the control plane for the test, and report the book's PromQL")
	urlVar(fs, &f.promURL, "prom-url", "ask this Prometheus the book's PromQL")
	durationVar(fs, &f.promInterval, "prom-interval", time.Second, "--prometheus: scrape interval")
	rateVar(fs, &f.connectRate, "connect-rate", 0, "simulated proxies' new streams per second (default 100; -1 unlimited)", -1)
	positiveVar(fs, &f.perConn, "proxies-per-conn", 1, "simulated proxies sharing one gRPC connection")
	durationVar(fs, &f.timeout, "timeout", time.Minute, "bound on each wait (first sync, each change's delivery)")
	fs.StringVar(&f.jsonOut, "json", "", "write the report as JSON to `FILE`")
	fs.StringVar(&f.db, "db", "", "store the run in this results database (`PATH` or postgres:// URL)")
	fs.StringVar(&f.name, "name", "", "the run's label")
	fs.StringVar(&f.meshName, "mesh-name", "", "with --target: the control plane's `name` (e.g. istiod), recorded in the results' provenance")
	fs.StringVar(&f.meshVersion, "mesh-version", "", "with --target: its `version` (e.g. 1.24.0)")
	fs.StringVar(&f.labels, "labels", "", "labels recorded with the run (compare and history select runs by them)")
	fs.BoolVar(&f.kube, "kube", false, "on a Kubernetes API server: the shape's services and pods as real objects, pods on kwok's fake nodes, meshperf pilot reading them (default shape uniform 10 x 10 x 10, churn endpoints: pods created and deleted)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "with --kube: the API server's kubeconfig `file` (e.g. the local cluster's /var/lib/meshperf/cluster/kubeconfig/admin)")
	fs.StringVar(&f.kwokCIDR, "kwok-cidr", kwok.DefaultCIDR, "with --kube: kwok's pod IP `range`")
	fs.StringVar(&f.istiod, "istiod", "", "with --kube: istiod instead of meshperf pilot on the API server, the `PATH` of a pilot-discovery built from istio/istio")
}

// kubeDefaults gives --kube its own defaults for what the user left unset:
// 1000 pods over 100 services (uniform, 10 namespaces x 10 services x 10
// replicas) and endpoint churn (pods created and deleted), the changes a
// cluster makes most.
func (f *cploadRunFlags) kubeDefaults(fs *flag.FlagSet) {
	if !f.kube {
		return
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["shape"] {
		f.shape = "uniform"
		if !set["namespaces"] {
			f.namespaces = 10
		}
		if !set["replicas"] {
			f.replicas = 10
		}
	}
	if !set["churn"] {
		f.churn = "endpoints"
	}
}

func (f *cploadRunFlags) mesh() (*shape.Mesh, string, error) {
	switch f.shape {
	case "booklab":
		m, err := shape.BookLab(shape.BookLabOptions{Seed: 1})
		return m, shape.BookNamespace, err
	case "uniform":
		m, err := shape.Uniform(shape.UniformOptions{Namespaces: orInt(f.namespaces, 5), ServicesPerNamespace: orInt(f.services, 10),
			Replicas: orInt(f.replicas, 1), Seed: 1})
		return m, "ns-0", err
	case "large":
		m, err := shape.IstioLargeLoadTest(shape.LargeLoadTestOptions{Namespaces: orInt(f.namespaces, 1), Replicas: f.replicas, Seed: 1})
		return m, "service-graph00", err
	}
	return nil, "", usagef("--shape %q: want uniform, large or booklab", f.shape)
}

func orInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

func (f *cploadRunFlags) config(pilotCommand []string, progress io.Writer) (driver.Config, error) {
	if f.delta && f.sotw {
		return driver.Config{}, usagef("--delta and --sotw exclude each other")
	}
	if err := checkStoreLocation(f.db); err != nil {
		return driver.Config{}, err
	}
	scoping, err := driver.ParseScoping(f.sidecar)
	if err != nil {
		return driver.Config{}, usageError{err.Error()}
	}
	m, ns, err := f.mesh()
	if err != nil {
		return driver.Config{}, err
	}
	if f.form != shape.FormServices && f.kube {
		return driver.Config{}, usagef("--form %s: with --kube the mesh is Services and pods on the API server", f.form)
	}
	if m, err = shape.InForm(m, f.form, "cluster.local"); err != nil {
		return driver.Config{}, usageError{"--" + err.Error()}
	}
	if f.namespace != "" {
		ns = f.namespace
	}
	svc := f.service
	if svc == "" {
		svc = firstService(m, ns)
	}
	if f.apiToken == "" {
		f.apiToken = os.Getenv(api.TokenEnv)
	}
	c := driver.Config{Name: f.name, Shape: f.shape, Mesh: m, Proxies: f.proxies, Scoping: scoping, Knobs: f.knobs, Delta: f.delta, NoSDS: f.noSDS,
		Churn: f.churn, Namespace: ns, Service: svc, Reps: f.reps, Delay: f.delay, Rate: f.rate, Duration: f.duration,
		Target: f.target, MeshName: f.meshName, MeshVersion: f.meshVersion, Labels: f.labels, ApplyWith: f.applyWith, APIURL: f.apiURL, APIToken: f.apiToken, MetricsURL: f.metrics,
		Prometheus: f.prometheus, PromURL: f.promURL, PromInterval: f.promInterval, PilotCommand: pilotCommand,
		ConnectRate: f.connectRate, ProxiesPerConn: f.perConn, Timeout: f.timeout, Progress: progress}
	if f.kube {
		c.Kube = &driver.KubeOptions{Kubeconfig: f.kubeconfig, CIDR: f.kwokCIDR}
		if f.istiod != "" {
			if f.meshName != "" || f.meshVersion != "" {
				return driver.Config{}, usagef("-istiod names its control plane itself (istiod, with `pilot-discovery version -s`): no --mesh-name or --mesh-version")
			}
			path, err := bench.LookPeer(bench.Istiod, f.istiod)
			if err != nil {
				return driver.Config{}, inputError{err}
			}
			c.Kube.Istiod = path
		}
	} else if f.kubeconfig != "" || f.istiod != "" {
		return driver.Config{}, usagef("--kubeconfig and -istiod go with --kube (against istiod off Kubernetes: --target, docs/cpload.md)")
	}
	if f.excludeNS != "" {
		c.Exclude = strings.Split(f.excludeNS, ",")
	}
	if f.shard != "" {
		if c.Shard, err = driver.ParseShard(f.shard); err != nil {
			return driver.Config{}, usageError{err.Error()}
		}
	}
	if err := c.Validate(); err != nil {
		return driver.Config{}, usageError{err.Error()}
	}
	return c, nil
}

// firstService is the app label of the first Service (or, in the
// ServiceEntry form, ServiceEntry) in ns, for endpoint
// churn (WorkloadEntries select by app).
func firstService(m *shape.Mesh, ns string) string {
	for _, r := range m.All() {
		if (r.Kind == config.KindService || r.Kind == config.KindServiceEntry) && r.Meta.Namespace == ns {
			return r.Meta.Name
		}
	}
	return ""
}

func cploadRun(ctx context.Context, args []string, stdout, stderr io.Writer, pilotCommand []string) int {
	cmd := newCommand("meshperf cpload run", "[flags]",
		"Loads a control plane with simulated sidecars, churns its config, and reports pushes, convergence, end-to-end times, config size, CPU and memory.")
	var f cploadRunFlags
	f.define(cmd.flags)
	cmd.flags.StringVar(&f.shard, "shard", "", "simulate only shard `I/N` of the fleet: N processes with the same flags and shards 1/N..N/N make one fleet against one --target, shard 1 loading the mesh and making the changes (the way past one process's open-files limit; cpload merge joins their --json reports)")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	f.kubeDefaults(cmd.flags)
	c, err := f.config(pilotCommand, stderr)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	r, err := driver.Run(ctx, c)
	if err != nil {
		return cmd.exit(stderr, runError(err))
	}
	r.Print(stdout)
	return cmd.exit(stderr, saveCpload(f.jsonOut, f.db, r, []*driver.Report{r}))
}

func cploadLab(ctx context.Context, args []string, stdout, stderr io.Writer, pilotCommand []string) int {
	cmd := newCommand("meshperf cpload lab", "[flags]",
		"Istio in Action chapter 11 in one command: lab mesh, performance test, mesh-wide Sidecar, PILOT_DEBOUNCE_AFTER, discoverySelectors.")
	var lc driver.LabConfig
	var jsonOut, db string
	fs := cmd.flags
	positiveVar(fs, &lc.Reps, "reps", 10, "performance-test repetitions per step")
	durationVar(fs, &lc.Delay, "delay", 2500*time.Millisecond, "wait between repetitions")
	durationVar(fs, &lc.DebounceAfter, "debounce-after", 2500*time.Millisecond, "PILOT_DEBOUNCE_AFTER of step 3")
	fs.StringVar(&lc.ExcludedNamespace, "excluded-namespace", "istioinaction-excluded", "namespace step 4's discoverySelectors exclude (its test runs there)")
	fs.BoolVar(&lc.NoExtra, "no-extra", false, "leave out the 600 extra resources")
	fs.BoolVar(&lc.Delta, "delta", false, "delta xDS")
	fs.BoolVar(&lc.Prometheus, "prometheus", false, "run Debian's prometheus per step and report the book's PromQL")
	durationVar(fs, &lc.PromInterval, "prom-interval", time.Second, "--prometheus: scrape interval")
	durationVar(fs, &lc.Timeout, "timeout", time.Minute, "bound on each wait")
	fs.StringVar(&jsonOut, "json", "", "write the steps as JSON to `FILE`")
	fs.StringVar(&db, "db", "", "store each step in this results database (`PATH` or postgres:// URL)")
	fs.StringVar(&lc.Labels, "labels", "", "labels recorded with each step")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := checkStoreLocation(db); err != nil {
		return cmd.exit(stderr, err)
	}
	lc.PilotCommand, lc.Progress = pilotCommand, stderr
	lr, err := driver.Lab(ctx, lc)
	if err != nil {
		return cmd.exit(stderr, runError(err))
	}
	lr.Print(stdout)
	reports := make([]*driver.Report, 0, len(lr.Steps))
	for _, s := range lr.Steps {
		reports = append(reports, s.Report)
	}
	return cmd.exit(stderr, saveCpload(jsonOut, db, lr, reports))
}

// runError is a run's failure as the command reports it: a fleet larger
// than the open-files limit lets a process connect is the command line's
// doing (exit status 2), which -proxies-per-conn mends.
func runError(err error) error {
	if errors.Is(err, sim.ErrTooFewFiles) {
		return inputError{err}
	}
	return err
}

// checkStoreLocation refuses, before a run, a -db ("" for none) that names
// no database, so that a typo in a URL is not found after the run.
func checkStoreLocation(db string) error {
	if db == "" {
		return nil
	}
	if _, err := results.ParseLocation(db); err != nil {
		return inputError{err}
	}
	return nil
}

// saveCpload writes v as JSON and the reports to the results store.
func saveCpload(jsonPath, dbPath string, v any, reports []*driver.Report) error {
	if jsonPath != "" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing --json: %w", err)
		}
	}
	if dbPath == "" {
		return nil
	}
	rows := make([]results.ControlPlaneRun, 0, len(reports))
	for _, r := range reports {
		row, err := r.StoreRow()
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return storeControlPlaneRuns(dbPath, rows)
}

// storeControlPlaneRuns adds control-plane runs (cpload's, bench pilot's)
// to the results store at dbPath.
func storeControlPlaneRuns(dbPath string, rows []results.ControlPlaneRun) error {
	st, err := openStore(dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, row := range rows {
		if err := st.InsertControlPlaneRun(row); err != nil {
			return err
		}
	}
	return nil
}
