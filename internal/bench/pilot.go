package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/istiod"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
)

// The control plane benchmark (meshperf bench pilot): a file change in the
// watched config directory, timed until each of N simulated proxies
// received the CDS carrying it, against meshperf pilot --configDir and,
// when given, istiod in its file mode, with the same debounce settings.
// It is cpload's config churn (sim fleet, DirApplier, metrics scraping)
// run against both, interleaved, with the time split by stage.

// Istiod is the peer: pilot-discovery, built by the user from istio/istio.
var Istiod = Peer{Name: "pilot-discovery", Flag: "-istiod",
	Install: "git clone https://github.com/istio/istio && cd istio && go build ./pilot/cmd/pilot-discovery (docs/bench.md)"}

// The subjects' names, as the table, the ratios and the stored runs'
// Target say them.
const (
	SubjectPilot  = "meshperf-pilot"
	SubjectIstiod = "istiod"
)

// PilotShape is the stored runs' shape: `meshperf history -cpload
// bench-pilot` follows them.
const PilotShape = "bench-pilot"

// The goals for ours against istiod.
const (
	PilotMedianGoal = 0.5
	PilotP99Goal    = 0.5
)

// PilotConfig is one benchmark.
type PilotConfig struct {
	Clients int           // simulated proxies, each in its own namespace
	Changes int           // changes per repeat
	Spacing time.Duration // between changes: longer than a debounce, so each is its own push
	Repeats int
	// Istiod is pilot-discovery's path; empty measures ours alone.
	Istiod string
	// Meshperf runs meshperf pilot ({exe, "pilot"}); nil: this executable.
	Meshperf []string
	// DebounceAfter and DebounceMax are given to both as Istio's
	// variables; Istio's defaults unless set.
	DebounceAfter, DebounceMax time.Duration
	Timeout                    time.Duration // per wait; cpload's default if 0
	Labels                     string
	Progress                   io.Writer
}

// Validate says what is wrong with c, in one line.
func (c *PilotConfig) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("-clients %d: want at least 1", c.Clients)
	case c.Changes < 1:
		return fmt.Errorf("-changes %d: want at least 1", c.Changes)
	case c.Repeats < 1:
		return fmt.Errorf("-repeats %d: want at least 1", c.Repeats)
	case c.Spacing <= 0:
		return fmt.Errorf("-spacing %v: want a positive duration", c.Spacing)
	case c.DebounceAfter <= 0 || c.DebounceMax <= 0:
		return errors.New("the debounce settings must be positive")
	}
	return nil
}

// PilotRun is one repeat of one subject.
type PilotRun struct {
	Subject string             `json:"subject"`
	Round   int                `json:"round"`
	E2E     driver.Percentiles `json:"endToEnd"` // write -> CDS received, every (change, client)
	Stages  Stages             `json:"stages"`
	Missed  int                `json:"missed"`
	CPU     float64            `json:"churnCpuSeconds"` // the control plane's, during the changes; NaN unknown
	RSSMB   float64            `json:"rssMaxMB"`        // NaN unknown
	Report  *driver.Report     `json:"report"`
}

// PilotSummary is a subject's medians over its repeats.
type PilotSummary struct {
	Subject string  `json:"subject"`
	P50     float64 `json:"p50Ms"`
	P90     float64 `json:"p90Ms"`
	P99     float64 `json:"p99Ms"`
	Max     float64 `json:"maxMs"`
	P50CV   float64 `json:"p50Cv"`
	P99CV   float64 `json:"p99Cv"`
	Stages  Stages  `json:"stages"` // medians of each repeat's stage means
	Missed  int     `json:"missed"` // over all repeats
	CPU     float64 `json:"churnCpuSeconds"`
	RSSMB   float64 `json:"rssMaxMB"`
}

// PilotResult is the benchmark's outcome.
type PilotResult struct {
	Config    PilotConfig    `json:"-"`
	Runs      []PilotRun     `json:"runs"`
	Summaries []PilotSummary `json:"summaries"`
	Ratios    []Ratio        `json:"ratios"` // ours / istiod; none without istiod
}

// MarshalJSON adds the settings as they were given; an unknown figure is
// null.
func (r PilotResult) MarshalJSON() ([]byte, error) {
	type plain PilotResult
	return results.MarshalNaN(struct {
		Clients       int    `json:"clients"`
		Changes       int    `json:"changes"`
		Spacing       string `json:"spacing"`
		Repeats       int    `json:"repeats"`
		DebounceAfter string `json:"debounceAfter"`
		DebounceMax   string `json:"debounceMax"`
		plain
	}{r.Config.Clients, r.Config.Changes, r.Config.Spacing.String(), r.Config.Repeats,
		r.Config.DebounceAfter.String(), r.Config.DebounceMax.String(), plain(r)})
}

// RunPilot runs the benchmark: every subject once per round, interleaved.
func RunPilot(ctx context.Context, c PilotConfig) (*PilotResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	mesh, err := shape.Uniform(shape.UniformOptions{Namespaces: c.Clients, ServicesPerNamespace: 1, Replicas: 1})
	if err != nil {
		return nil, err
	}
	subjects := []string{SubjectPilot}
	if c.Istiod != "" {
		subjects = append(subjects, SubjectIstiod)
	}
	res := &PilotResult{Config: c}
	err = Interleave(ctx, c.Repeats, subjects, func(ctx context.Context, round int, subject string) error {
		c.progress("round %d/%d: %s", round, c.Repeats, subject)
		run, err := runPilotOnce(ctx, &c, mesh, subject)
		if err != nil {
			return fmt.Errorf("%s, round %d: %w", subject, round, err)
		}
		run.Round = round
		res.Runs = append(res.Runs, *run)
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.summarize(subjects)
	return res, nil
}

func (c *PilotConfig) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "bench pilot: "+format+"\n", args...)
	}
}

// controlPlane is one subject running for one repeat.
type controlPlane struct {
	xds, metricsURL string
	pilot           *proc.Pilot // meshperf pilot's process; nil for istiod
	pid             int
	stop            func() error
}

// runPilotOnce starts the subject on a fresh config directory holding the
// mesh, runs the changes against it, and splits their times by stage.
func runPilotOnce(ctx context.Context, c *PilotConfig, mesh *shape.Mesh, subject string) (*PilotRun, error) {
	tmp, err := os.MkdirTemp("", "meshperf-bench-pilot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	configDir, dataDir := filepath.Join(tmp, "config"), filepath.Join(tmp, "data")
	for _, d := range []string{configDir, dataDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The mesh is in place before the control plane starts, as a
	// deployment's config would be, so that its first read holds it.
	if err := (&driver.DirApplier{Dir: configDir}).Apply(ctx, mesh.All()); err != nil {
		return nil, err
	}
	var cp *controlPlane
	if subject == SubjectIstiod {
		cp, err = startIstiod(ctx, c, configDir, dataDir)
	} else {
		cp, err = startMeshperfPilot(ctx, c, configDir, dataDir)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.stop() }()

	dc := driver.Config{Name: PilotShape + " " + subject, Shape: PilotShape, Mesh: mesh, NoSDS: true,
		Knobs: driver.Knobs{DebounceAfter: c.DebounceAfter, DebounceMax: c.DebounceMax},
		Churn: driver.ChurnConfig, Namespace: mesh.Proxies[0].Namespace,
		Rate: 1 / c.Spacing.Seconds(), Duration: time.Duration(c.Changes) * c.Spacing,
		Target: cp.xds, ApplyWith: "dir:" + configDir, MetricsURL: cp.metricsURL, TargetPID: cp.pid,
		Subject: subject, Labels: c.Labels, Timeout: c.Timeout}
	if subject == SubjectIstiod {
		dc.MeshName = "istiod"
		if v, err := istiod.Version(ctx, c.Istiod); err == nil {
			dc.MeshVersion = v
		}
	} else {
		dc.MeshName = "meshperf"
		dc.MeshVersion = results.ThisBuild().Version
	}
	rep, err := driver.Run(ctx, dc)
	if err != nil {
		return nil, err
	}
	run := &PilotRun{Subject: subject, Report: rep, CPU: math.NaN(), RSSMB: math.NaN()}
	if ch := rep.Churn; ch != nil {
		run.E2E, run.Missed = ch.EndToEnd, ch.Missed
	}
	if p := rep.Process; p != nil {
		run.CPU, run.RSSMB = p.ChurnCPU, p.RSSMaxMB
	}
	if subject == SubjectIstiod {
		before, after := rep.Metrics()
		run.Stages = istiodStages(before, after)
	} else {
		if traces, err := pushTraces(ctx, cp.pilot); err != nil {
			// A build from before /debug/push_trace (-meshperf OLD): its
			// end to end still counts.
			run.Stages = unknownStages(err.Error())
		} else {
			run.Stages = splitStages(rep.Changes(), proxyIDs(mesh), traces)
		}
	}
	return run, nil
}

// startMeshperfPilot runs meshperf pilot --configDir with the knobs, on
// loopback, trusting the identities the simulated proxies claim, as
// cpload's pilot does.
func startMeshperfPilot(ctx context.Context, c *PilotConfig, configDir, dataDir string) (*controlPlane, error) {
	command, err := driver.PilotCommand(c.Meshperf)
	if err != nil {
		return nil, err
	}
	command = append(command, "--configDir", configDir)
	p, err := proc.StartPilot(ctx, proc.PilotOptions{Command: command, DataDir: dataDir, LogLevel: "warn",
		Env: debounceEnv(c), LogPath: filepath.Join(dataDir, "pilot.log"), Name: "meshperf pilot", InsecureTrustClaimedIdentity: true}, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &controlPlane{xds: p.Addrs.GRPC, metricsURL: p.MetricsURL(), pilot: p, pid: p.PID(), stop: p.Stop}, nil
}

// debounceEnv is the debounce settings as Istio's variables, the same for
// both subjects.
func debounceEnv(c *PilotConfig) []string {
	return []string{
		"PILOT_DEBOUNCE_AFTER=" + c.DebounceAfter.String(),
		"PILOT_DEBOUNCE_MAX=" + c.DebounceMax.String(),
		"PILOT_ENABLE_EDS_DEBOUNCE=true",
	}
}

// pushTraces reads meshperf pilot's /debug/push_trace.
func pushTraces(ctx context.Context, p *proc.Pilot) ([]discovery.PushTrace, error) {
	client, err := p.APIClient()
	if err != nil {
		return nil, err
	}
	raw, err := client.PushTrace(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the push trace: %w", err)
	}
	var out []discovery.PushTrace
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("reading the push trace: %w", err)
	}
	return out, nil
}

// StoreRow is the run as a row of the results store's cp_runs: its
// shape bench-pilot, its target the subject, its report with the stages.
func (r PilotRun) StoreRow() (results.ControlPlaneRun, error) {
	if r.Report == nil {
		return results.ControlPlaneRun{}, fmt.Errorf("%s round %d: no report to store", r.Subject, r.Round)
	}
	row, err := r.Report.StoreRow()
	if err != nil {
		return row, err
	}
	js, err := results.MarshalNaN(r) // an unknown figure is null
	if err != nil {
		return row, fmt.Errorf("%s round %d cannot be stored: %w", r.Subject, r.Round, err)
	}
	row.Shape, row.Target, row.ReportJSON = PilotShape, r.Subject, string(js)
	return row, nil
}
