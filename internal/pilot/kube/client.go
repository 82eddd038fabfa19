package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoKubeconfig matches RESTConfig's errors for a missing kubeconfig: input
// the user must fix, not a failure of the cluster.
var ErrNoKubeconfig = errors.New("no kubeconfig")

// inClusterEnv is what the kubelet sets in every container, and what istiod
// takes as "running in a cluster".
const inClusterEnv = "KUBERNETES_SERVICE_HOST"

// RESTConfig is the client configuration: the kubeconfig file at path, or,
// when path is empty and getenv says the process runs in a pod, the pod's
// service account (as istiod). It reads files only; whether the API server
// answers is Reachable's question.
func RESTConfig(path string, getenv func(string) string) (*rest.Config, error) {
	if path == "" {
		if getenv(inClusterEnv) == "" {
			return nil, fmt.Errorf("%w: give --kubeconfig PATH, or run in a pod (%s is not set)", ErrNoKubeconfig, inClusterEnv)
		}
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("%w: in-cluster configuration: %v", ErrNoKubeconfig, err)
		}
		return tune(cfg), nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrNoKubeconfig, path, errors.Unwrap(err))
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrNoKubeconfig, path, err)
	}
	return tune(cfg), nil
}

// tune sets the client's rate limits as istiod does (PILOT's defaults of 80
// QPS, burst 160): client-go's 5 QPS would make the initial lists of a large
// cluster, and the CRD install, wait on the client rather than the server.
func tune(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 80, 160
	}
	cfg.UserAgent = "meshperf-pilot"
	return cfg
}

// DefaultReachTimeout bounds how long New waits for the API server to answer.
const DefaultReachTimeout = 10 * time.Second

// Reachable asks the API server for its version until it answers or timeout
// passes, and says which address did not answer.
func Reachable(ctx context.Context, cs kubernetes.Interface, host string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Kubernetes API server at %s did not answer within %s: %v", host, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
