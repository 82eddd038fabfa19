package kubetest

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/testenv"
)

// ClientAs is a clientset acting as the service account namespace/name
// (the administrator impersonating it, with the groups the API server
// gives a service account's token), so that a test sees exactly what RBAC
// grants that account.
func (s *Server) ClientAs(t testing.TB, namespace, name string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfigAs(namespace, name))
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

// RESTConfigAs is the configuration ClientAs uses, for other clientsets
// (Istio's, the Gateway API's) acting as the service account.
func (s *Server) RESTConfigAs(namespace, name string) *rest.Config {
	cfg := s.RESTConfig()
	cfg.Impersonate.UserName = "system:serviceaccount:" + namespace + ":" + name
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	return cfg
}

// Kubectl runs the pinned kubectl as the administrator with stdin and
// returns its stdout, or an error carrying its stderr.
func (s *Server) Kubectl(t testing.TB, stdin []byte, args ...string) (string, error) {
	t.Helper()
	bins := testenv.NeedKubernetes(t)
	cmd := exec.Command(bins.Path(dist.Kubectl), append([]string{"--kubeconfig", s.Kubeconfig(t)}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}
