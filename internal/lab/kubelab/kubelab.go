// Package kubelab runs the lab's scenarios on a Kubernetes cluster as
// Istio's benchmark does (istio/tools perf/benchmark): a client and a server
// Deployment in a namespace of their own, the mode chosen by Istio's own
// labels and annotations (sidecar.istio.io/inject per Deployment, the
// namespace's istio-injection and istio.io/dataplane-mode labels, a waypoint
// Gateway), the load exec'd in the client pod, each proxy's counters read
// through the API server's pod proxy, and each container's CPU and memory
// from the kubelet's resource metrics (or Prometheus). It shares the netns
// lab's matrix, checks and outputs (package lab), so the results are the
// same records, marked network=kubernetes with the cluster they ran on.
package kubelab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// Config is one invocation of the lab on a cluster.
type Config struct {
	Scenario *scenario.Scenario
	// Kubeconfig is the cluster's kubeconfig file; "" in a pod uses the
	// pod's service account.
	Kubeconfig string
	Mesh       Mesh
	// ImageRepo holds meshperf's image (image.DefaultRepo, imported into
	// the node, when empty: pulled Never); PromURL, when set, is the
	// Prometheus CPU and memory come from.
	ImageRepo, PromURL string
	RunID, OutDir      string
	DBPath, Labels     string
	Keep               bool
	// ReadyTimeout bounds the wait for a mode's pods (2 minutes if zero);
	// DeleteWait the wait for the namespace to go at the end (1 minute).
	ReadyTimeout, DeleteWait time.Duration
	Out                      io.Writer
	Progress                 io.Writer
	ProgressTTY              bool
	Live                     lab.LivePublisher
}

// PreconditionError is a cluster that cannot run the lab as asked, found
// before anything was created in it: bad input, exit status 2.
type PreconditionError struct{ Err error }

func (e PreconditionError) Error() string { return e.Err.Error() }
func (e PreconditionError) Unwrap() error { return e.Err }

func precondition(format string, args ...any) error {
	return PreconditionError{fmt.Errorf(format, args...)}
}

// defaults fills cfg's empty fields.
func (cfg Config) defaults() Config {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Mesh == "" {
		cfg.Mesh = MeshMeshperf
	}
	if cfg.RunID == "" {
		cfg.RunID = pod.NewRunID()
	}
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join("results", "lab", cfg.RunID)
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.DeleteWait <= 0 {
		cfg.DeleteWait = time.Minute
	}
	return cfg
}

// Render is how cfg's objects are rendered in its namespace.
func (cfg Config) render() Render {
	r := Render{Namespace: NamespacePrefix + cfg.RunID, RunID: cfg.RunID, ImageRepo: cfg.ImageRepo, Mesh: cfg.Mesh,
		Pull: corev1.PullIfNotPresent}
	if r.ImageRepo == "" {
		// A name no registry answers to: the node has the image by import
		// or not at all.
		r.ImageRepo, r.Pull = image.DefaultRepo, corev1.PullNever
	}
	return r
}

// CheckModes says why the scenario's modes cannot run on a cluster with
// mesh, if they cannot: the ztunnel twins compare meshperf's node proxy
// with ztunnel's binary on one machine.
func CheckModes(s *scenario.Scenario, mesh Mesh) error {
	var bad []scenario.Mode
	for _, m := range s.Modes {
		if m.Ztunnel() {
			bad = append(bad, m)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--kube --mesh %s cannot run %s (the ztunnel twins run on the netns lab: -modes without them)", mesh, modeList(bad))
	}
	if s.IsGraph() {
		return errors.New("--kube runs the two-pod scenarios; service graphs run on the netns lab")
	}
	return nil
}

// Run runs cfg's scenario on the cluster. Its error is the lab's not
// starting (a PreconditionError when nothing was created) or the outputs'
// not being written; failed runs are in the report.
func Run(ctx context.Context, cfg Config) (*lab.Report, error) {
	start := time.Now()
	cfg = cfg.defaults()
	if cfg.Scenario == nil {
		return nil, errors.New("lab: no scenario")
	}
	if err := CheckModes(cfg.Scenario, cfg.Mesh); err != nil {
		return nil, PreconditionError{err}
	}
	c, err := Connect(ctx, cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := c.Preflight(ctx, cfg.Scenario, cfg.Mesh); err != nil {
		return nil, err
	}
	k := &kubeLab{cfg: cfg, c: c, render: cfg.render()}
	if k.prov, err = c.provenance(ctx, cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab: output directory: %w", err)
	}
	store, err := lab.OpenStore(cfg.DBPath)
	if err != nil {
		return nil, err
	}
	rep := &lab.Report{RunID: cfg.RunID, OutDir: cfg.OutDir, Network: pod.KindKubernetes, NamePrefix: k.render.Namespace,
		Cluster: k.prov.common.Machine.Hostname + ", mesh " + string(cfg.Mesh) + " " + k.prov.control.Version}
	if store != nil {
		defer store.Close()
		rep.DB = store.String()
	}
	fmt.Fprintf(cfg.Out, "meshperf lab: cluster %s, namespace %s\n", c.describe(), k.render.Namespace)
	defer k.finish()
	specs := cfg.Scenario.Expand()
	// The first mode comes up before the matrix: a cluster that cannot run
	// the lab's pods at all (no image, no CNI) is one error, not a failed
	// run per mode.
	if err := k.create(ctx, specs[0]); err != nil {
		if ctx.Err() != nil {
			return rep, fmt.Errorf("lab: interrupted while %s came up", specs[0].Mode)
		}
		return rep, err
	}
	rep.Outcomes = lab.Matrix{
		Specs: specs, RunID: cfg.RunID, Store: store,
		Progress: cfg.Progress, ProgressTTY: cfg.ProgressTTY, Live: cfg.Live, Logf: k.logf,
		Ensure: k.ensure, RunOne: k.runOne, Failed: k.failed,
	}.Run(ctx)
	rep.Wall = time.Since(start)
	if err := lab.WriteOutputs(rep, cfg.Out); err != nil {
		return rep, err
	}
	return rep, nil
}

func (k *kubeLab) logf(format string, args ...any) {
	fmt.Fprintf(k.cfg.Out, format+"\n", args...)
}
