package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// RESTConfig is the client configuration, found as kubectl finds it: the
// kubeconfig file at path (--kubeconfig) when given; else the files of
// KUBECONFIG (a list separated by colons, merged, the first file's value
// winning), or ~/.kube/config when KUBECONFIG is unset; else, when getenv
// says the process runs in a pod, the pod's service account (as istiod).
// Files named by KUBECONFIG that do not exist are skipped, as kubectl
// does. It reads files only; whether the API server answers is
// Reachable's question.
func RESTConfig(path string, getenv func(string) string) (*rest.Config, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrNoKubeconfig, path, errors.Unwrap(err))
		}
		return load(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, "--kubeconfig "+path)
	}
	searched, files := defaultKubeconfigs(getenv)
	if len(files) > 0 {
		return load(&clientcmd.ClientConfigLoadingRules{Precedence: files}, strings.Join(files, string(filepath.ListSeparator)))
	}
	if getenv(inClusterEnv) != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("%w: in-cluster configuration: %v", ErrNoKubeconfig, err)
		}
		return tune(cfg), nil
	}
	return nil, fmt.Errorf("%w: give --kubeconfig PATH, set KUBECONFIG, or run in a pod (%s, and %s is not set)", ErrNoKubeconfig, searched, inClusterEnv)
}

// defaultKubeconfigs are the kubeconfig files kubectl would read without
// --kubeconfig that exist, and what was searched, for the error when none
// does.
func defaultKubeconfigs(getenv func(string) string) (searched string, files []string) {
	var candidates []string
	if list := getenv(clientcmd.RecommendedConfigPathEnvVar); list != "" {
		candidates = filepath.SplitList(list)
		searched = "no file of KUBECONFIG=" + list + " exists"
	} else if home := getenv("HOME"); home != "" {
		candidates = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
		searched = "KUBECONFIG is not set, no " + candidates[0]
	} else {
		searched = "neither KUBECONFIG nor HOME is set"
	}
	for _, f := range candidates {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && !st.IsDir() {
			files = append(files, f)
		}
	}
	return searched, files
}

// load reads the kubeconfig the rules name (from, for errors).
func load(rules *clientcmd.ClientConfigLoadingRules, from string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoKubeconfig, from, err)
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
