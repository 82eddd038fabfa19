package cli

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshperf/meshperf/internal/pilot/kube"
)

// pilotKubeFlags are meshperf pilot's Kubernetes mode flags.
type pilotKubeFlags struct {
	kubeconfig  string
	installCRDs bool

	// Read by parse: the API server's client configuration and a
	// clientset on it, nil outside the Kubernetes mode. The clientset is
	// what the CA (its root's Secret, token reviews) and the injector's
	// caBundle use; a test may set it alone, for those parts without the
	// informers.
	rest   *rest.Config
	client kubernetes.Interface
	// inPod is set when the pilot runs in a pod (no --kubeconfig, as
	// istiod): its data directory then dies with the pod, so the CA's root
	// is kept in a Secret of its namespace. A pilot on a host keeps it in
	// its data directory, as off Kubernetes.
	inPod bool
	// src is the source that source returned, once it has.
	src *kube.Source
}

func (k *pilotKubeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "read config and the service registry from the Kubernetes cluster of this kubeconfig `file` (istiod's mode); in a pod, the pod's service account is used without it")
	fs.BoolVar(&k.installCRDs, "install-crds", false, "with --kubeconfig or in a pod: install Istio's CRDs (the istio.io/api module's manifest), and the Gateway API's Gateway CRD (for waypoints), when the cluster lacks them")
}

// parse decides the mode: Kubernetes with --kubeconfig, or in a pod (as
// istiod) unless --configDir asks for files. It reads the kubeconfig but
// does not reach the cluster: bad input is refused before anything is
// bound.
func (k *pilotKubeFlags) parse(configDir string, getenv func(string) string) error {
	if k.kubeconfig != "" && configDir != "" {
		return usagef("--kubeconfig and --configDir are two sources of config: give one")
	}
	inPod := k.kubeconfig == "" && configDir == "" && getenv("KUBERNETES_SERVICE_HOST") != ""
	if k.kubeconfig == "" && !inPod {
		if k.installCRDs {
			return usagef("--install-crds needs a cluster: give --kubeconfig, or run in a pod")
		}
		return nil
	}
	cfg, err := kube.RESTConfig(k.kubeconfig, getenv)
	if err != nil {
		return inputError{err}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return inputError{err}
	}
	k.rest, k.client, k.inPod = cfg, client, inPod
	return nil
}

// source checks the cluster (reachable, RBAC, CRDs) and returns the
// Kubernetes source, or nil outside the Kubernetes mode.
func (k *pilotKubeFlags) source(ctx context.Context, log *slog.Logger) (*kube.Source, error) {
	if k.rest == nil {
		return nil, nil
	}
	src, err := kube.New(ctx, kube.Options{RESTConfig: k.rest, InstallCRDs: k.installCRDs, Logger: log})
	if err != nil && ctx.Err() != nil {
		return nil, errors.Join(err, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	k.src = src
	return src, nil
}

// rootSecretClient is the client that keeps the CA's root in a Secret: the
// cluster's when the pilot runs in a pod, nil otherwise.
func (k *pilotKubeFlags) rootSecretClient() kubernetes.Interface {
	if !k.inPod {
		return nil
	}
	return k.client
}
