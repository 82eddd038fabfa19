package driver

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// LabConfig is `meshperf cpload lab`: Istio in Action chapter 11's sequence.
type LabConfig struct {
	Reps          int           // performance-test repetitions (the book: 10)
	Delay         time.Duration // between them (the book: 2.5s)
	DebounceAfter time.Duration // the tuned debounce (the book: 2500ms)
	// ExcludedNamespace receives the last step's performance test; the
	// book's discoverySelectors leave it out.
	ExcludedNamespace string
	NoExtra           bool // leave out the 600 extra resources
	Delta             bool
	Prometheus        bool
	PromInterval      time.Duration
	PilotCommand      []string
	Timeout           time.Duration
	Labels            string // recorded in each step's provenance
	Progress          io.Writer
}

// LabStep is one row of the lab's table.
type LabStep struct {
	Name   string  `json:"name"`
	Report *Report `json:"report"`
	// The book's figures for the step (0 where it gives none).
	BookPushes float64 `json:"bookPushes"`
	BookSize   string  `json:"bookConfigSize,omitempty"`
}

// LabReport is the whole sequence.
type LabReport struct {
	Steps []LabStep `json:"steps"`
	// Reductions from the mesh-wide Sidecar: baseline over scoped.
	PushReduction float64 `json:"pushReduction"`
	SizeReduction float64 `json:"configSizeReduction"`
}

// Lab runs the chapter's sequence on one meshperf pilot data directory: the
// lab mesh and a performance test; the mesh-wide Sidecar and the test
// again; PILOT_DEBOUNCE_AFTER raised (pilot restarted with it: meshperf
// pilot reads its knobs at start, as istiod does) and the test again; then
// the book's discoverySelectors with the test made in a namespace they
// exclude.
func Lab(ctx context.Context, lc LabConfig) (*LabReport, error) {
	if lc.Reps <= 0 {
		lc.Reps = 10
	}
	if lc.Delay < 0 {
		lc.Delay = 0
	}
	if lc.DebounceAfter <= 0 {
		lc.DebounceAfter = 2500 * time.Millisecond
	}
	if lc.ExcludedNamespace == "" {
		lc.ExcludedNamespace = "istioinaction-excluded"
	}
	mesh, err := shape.BookLab(shape.BookLabOptions{NoExtra: lc.NoExtra, Seed: 1})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meshperf-cpload-lab-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base := Config{Shape: "booklab", Mesh: mesh, Delta: lc.Delta, Churn: ChurnPerfTest, Namespace: shape.BookNamespace,
		Reps: lc.Reps, Delay: lc.Delay, Prometheus: lc.Prometheus, PromInterval: lc.PromInterval,
		PilotCommand: lc.PilotCommand, DataDir: dir, Timeout: lc.Timeout, Progress: lc.Progress, ConnectRate: -1, Labels: lc.Labels}
	steps := []struct {
		name       string
		book       float64
		size       string
		prepare    func(c *Config)
		meshConfig string
		apply      func(context.Context, *env) error
	}{
		{"1. lab mesh (615 resources)", 514, "2.3 MB", func(c *Config) {}, "", func(ctx context.Context, e *env) error {
			return e.api.Apply(ctx, mesh.All())
		}},
		{"2. mesh-wide Sidecar", 70, "516 KB", func(c *Config) { c.Scoping = ScopeMeshWide }, "", func(ctx context.Context, e *env) error {
			return e.api.Apply(ctx, scopeResources(mesh, ScopeMeshWide))
		}},
		{"3. PILOT_DEBOUNCE_AFTER=" + lc.DebounceAfter.String(), 63, "", func(c *Config) {
			c.Scoping, c.Knobs.DebounceAfter = ScopeMeshWide, lc.DebounceAfter
		}, "", nil},
		{"4. discoverySelectors exclude " + lc.ExcludedNamespace, 0, "", func(c *Config) {
			c.Scoping, c.Knobs.DebounceAfter = ScopeMeshWide, lc.DebounceAfter
			c.Exclude, c.Namespace = []string{lc.ExcludedNamespace}, lc.ExcludedNamespace
		}, DiscoverySelectorsMeshConfig, func(ctx context.Context, e *env) error {
			return e.api.Apply(ctx, []*config.Resource{excludedNamespace(lc.ExcludedNamespace)})
		}},
	}
	out := &LabReport{}
	for _, s := range steps {
		c := base
		c.Name = s.name
		s.prepare(&c)
		c.admitTheFleet() // as cpload run: the lab connects its proxies all at once
		c.progress("lab step %s", s.name)
		r, err := labStep(ctx, &c, s.meshConfig, s.apply)
		if err != nil {
			return out, fmt.Errorf("lab step %q: %w", s.name, err)
		}
		out.Steps = append(out.Steps, LabStep{Name: s.name, Report: r, BookPushes: s.book, BookSize: s.size})
	}
	a, b := out.Steps[0].Report, out.Steps[1].Report
	if a.ControlPlane != nil && b.ControlPlane != nil && b.ControlPlane.Pushes > 0 {
		out.PushReduction = a.ControlPlane.Pushes / b.ControlPlane.Pushes
	}
	if sa, sb := workloadSize(a), workloadSize(b); sb > 0 {
		out.SizeReduction = sa / sb
	}
	return out, nil
}

// labStep starts pilot on the lab's data directory (so config carries over
// from step to step), applies the step's change, and runs the test.
func labStep(ctx context.Context, c *Config, meshConfig string, apply func(context.Context, *env) error) (*Report, error) {
	if apply != nil {
		// The change is applied, then pilot restarted on the same store, so
		// that the proxies' first config certainly reflects it: a pilot with
		// no proxies connected was seen serving new connections config from
		// before a Sidecar applied just earlier (for the integrator to
		// look at).
		e, err := startEnv(ctx, &Config{PilotCommand: c.PilotCommand, Mesh: c.Mesh}, c.DataDir, meshConfig)
		if err != nil {
			return nil, err
		}
		err = apply(ctx, e)
		e.stop()
		if err != nil {
			return nil, err
		}
	}
	e, err := startEnv(ctx, c, c.DataDir, meshConfig)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	return runStep(ctx, c, e)
}

// workloadSize is the catalog's config: its config dump when served, else
// its xDS bytes.
func workloadSize(r *Report) float64 {
	if r.ConfigSize.WorkloadDumpBytes > 0 {
		return float64(r.ConfigSize.WorkloadDumpBytes)
	}
	return float64(r.ConfigSize.WorkloadBytes)
}

// Print writes the lab's table beside the book's figures.
func (l *LabReport) Print(w io.Writer) {
	// The step column is as wide as its longest name (a discoverySelectors
	// step names the namespace it excludes).
	width := len("step")
	for _, s := range l.Steps {
		width = max(width, len(s.Name))
	}
	fmt.Fprintf(w, "%-*s %8s %8s %10s %12s %12s %12s %10s\n", width, "step", "pushes", "book", "P99 conv", "P99 e2e", "catalog xDS", "config_dump", "book size")
	for _, s := range l.Steps {
		r := s.Report
		pushes, conv := math.NaN(), math.NaN()
		if r.ControlPlane != nil {
			pushes = r.ControlPlane.Pushes
			if r.ControlPlane.Convergence.N > 0 {
				conv = r.ControlPlane.Convergence.P99
			}
		}
		e2e := math.NaN()
		if r.Churn != nil && r.Churn.EndToEnd.N > 0 {
			e2e = r.Churn.EndToEnd.P99
		}
		book := "-"
		if s.BookPushes > 0 {
			book = fmt.Sprintf("%.0f", s.BookPushes)
		}
		dump := "-"
		if r.ConfigSize.WorkloadDumpBytes > 0 {
			dump = bytesStr(float64(r.ConfigSize.WorkloadDumpBytes))
		}
		pushesStr := "n/a" // not scraped, as msStr says of a missing time
		if !math.IsNaN(pushes) {
			pushesStr = fmt.Sprintf("%.0f", pushes)
		}
		fmt.Fprintf(w, "%-*s %8s %8s %10s %12s %12s %12s %10s\n", width, s.Name, pushesStr, book, msStr(conv), msStr(e2e),
			bytesStr(float64(r.ConfigSize.WorkloadBytes)), dump, orDefault(s.BookSize, "-"))
	}
	fmt.Fprintf(w, "mesh-wide Sidecar: push count %.1fx fewer (book 7.3x), config size %.1fx smaller (book 4.5x)\n",
		l.PushReduction, l.SizeReduction)
	fmt.Fprintln(w, "P99 conv is pilot_proxy_convergence_time over the test (after debounce, as the book's latency);")
	fmt.Fprintln(w, "P99 e2e is change applied -> received by every affected simulated proxy (debounce included).")
}
