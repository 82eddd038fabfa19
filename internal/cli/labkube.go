package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/kubelab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// kubeFlags are lab run's flags for a cluster.
type kubeFlags struct {
	on                 bool
	kubeconfig, mesh   string
	imageRepo, promURL string
	parsedMesh         kubelab.Mesh
}

func (k *kubeFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&k.on, "kube", false, "run on a Kubernetes cluster (client and server Deployments in a namespace of their own) instead of this machine's pods")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "--kube: the cluster's kubeconfig `file` (default $KUBECONFIG; in a pod, its service account)")
	fs.StringVar(&k.mesh, "mesh", string(kubelab.MeshMeshperf), "--kube: the `mesh` to measure: meshperf (meshperf pilot on the cluster) or istio (the cluster's Istio)")
	fs.StringVar(&k.imageRepo, "image-repo", "", "--kube: pull meshperf's image from this `repository` (default: "+image.DefaultRepo+", imported into the node)")
	fs.StringVar(&k.promURL, "prom-url", "", "--kube: take CPU and memory from this Prometheus `URL` (Istio's benchmark's queries) instead of the kubelets")
}

// checkOnlyWithKube refuses the cluster's flags without --kube, where
// they would be ignored and the lab would run on this machine instead.
func (k *kubeFlags) checkOnlyWithKube(fs *flag.FlagSet) error {
	if k.on {
		return nil
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "kubeconfig", "mesh", "image-repo", "prom-url":
			if err == nil {
				err = usagef("-%s is for a cluster: add --kube, or leave it out to run on this machine's pods", f.Name)
			}
		}
	})
	return err
}

// check validates the flags for s: the netns lab's flags a cluster run
// does not take, the mesh, the modes the mesh can run.
func (k *kubeFlags) check(s *scenario.Scenario, f labRunFlags) error {
	switch {
	case f.prometheus:
		return usagef("--kube takes --prom-url (the cluster's Prometheus), not --prometheus")
	case f.ztunnel != "":
		return usagef("--kube does not take -ztunnel (ambient on a cluster is --mesh istio)")
	case f.proxy != "":
		return usagef("--kube does not take -proxy: the cluster's mesh injects its own")
	}
	var err error
	if k.parsedMesh, err = kubelab.ParseMesh(k.mesh); err != nil {
		return usageError{err.Error()}
	}
	if k.imageRepo != "" {
		if err := image.CheckRepo(k.imageRepo); err != nil {
			return usagef("--image-repo: %v", err)
		}
	}
	if err := kubelab.CheckModes(s, k.parsedMesh); err != nil {
		return inputError{err}
	}
	if k.kubeconfig == "" {
		k.kubeconfig = os.Getenv("KUBECONFIG")
	}
	return nil
}

// runKubeLab runs the scenario on the cluster. Exit status: 0 every run
// succeeded; 1 a run failed or the lab could not start on the cluster; 2 a
// precondition (no kubeconfig, no API server, no mesh), nothing created.
func runKubeLab(cmd *command, base lab.Config, k *kubeFlags, publish *publishFlags, stdout, stderr io.Writer) int {
	ctx, stop := labContextCleanedBy(stderr, "delete its namespace: kubectl delete namespace -l "+kubelab.RunLabel)
	defer stop()
	base.Out, base.Progress, base.ProgressTTY = stdout, stdout, isTerminal(stdout)
	pub := startLabPublishing(publish, &base, stderr)
	cfg := kubelab.Config{Scenario: base.Scenario, Kubeconfig: k.kubeconfig, Mesh: k.parsedMesh, ImageRepo: k.imageRepo,
		PromURL: k.promURL, OutDir: base.OutDir, DBPath: base.DBPath, Labels: base.Labels, Keep: base.Keep,
		Out: base.Out, Progress: base.Progress, ProgressTTY: base.ProgressTTY, Live: base.Live}
	rep, err := kubelab.Run(ctx, cfg)
	failed := failedRuns(rep)
	if pub != nil {
		pub.Publish(labEndEvent(rep, failed, ctx.Err(), err))
		pub.Close()
	}
	var pre kubelab.PreconditionError
	if errors.As(err, &pre) {
		return cmd.exit(stderr, inputError{err})
	}
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if failed > 0 || ctx.Err() != nil {
		return exitFailed
	}
	return exitOK
}

func labManifest(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab manifest", "[SCENARIO|FILE] [flags]",
		"Renders the objects lab run --kube applies for each of a scenario's modes (YAML, `# mode:` before each),\n"+
			"with Istio's labels and annotations; no cluster is needed.")
	mesh := cmd.flags.String("mesh", string(kubelab.MeshMeshperf), "the `mesh`: meshperf or istio")
	repo := cmd.flags.String("image-repo", "", "image `repository` (default: "+image.DefaultRepo+", imported into the node)")
	var o scenario.Overrides
	shapeFlags(cmd.flags, &o)
	rest, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(rest) > 1 {
		return cmd.exit(stderr, usagef("one scenario at a time, got %q", rest))
	}
	name := scenario.DefaultName
	if len(rest) == 1 {
		name = rest[0]
	}
	m, err := kubelab.ParseMesh(*mesh)
	if err != nil {
		return cmd.exit(stderr, usageError{err.Error()})
	}
	if *repo != "" {
		if err := image.CheckRepo(*repo); err != nil {
			return cmd.exit(stderr, usagef("--image-repo: %v", err))
		}
	}
	s, err := scenario.Load(name)
	if err == nil {
		s, err = s.Apply(o)
	}
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	b, err := kubelab.Manifest(s, m, *repo)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if _, err := stdout.Write(b); err != nil {
		return cmd.exit(stderr, fmt.Errorf("write: %w", err))
	}
	return exitOK
}
