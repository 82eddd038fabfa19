package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/testenv"
)

// cluster kubectl runs the pinned kubectl with the state directory's
// administrator kubeconfig: here a real API server's, put where `cluster
// up` writes it.
func TestClusterKubectlUsesTheClustersKubeconfig(t *testing.T) {
	testenv.NeedKubernetes(t)
	s := kubetest.Start(t)
	stateDir := t.TempDir()
	kc := cluster.AdminKubeconfig(stateDir)
	data, err := os.ReadFile(s.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(kc), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := s.NewNamespace(t, nil)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "not-this-one"))

	var stdout, stderr bytes.Buffer
	code := clusterKubectl([]string{"-state-dir", stateDir, "-o", "name", "get", "namespace", ns}, nil, &stdout, &stderr)
	if code != exitOK || strings.TrimSpace(stdout.String()) != "namespace/"+ns {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and namespace/%s", code, stdout.String(), stderr.String(), ns)
	}
	// kubectl's own failure is kubectl's exit status and message.
	stdout.Reset()
	stderr.Reset()
	code = clusterKubectl([]string{"-state-dir", stateDir, "get", "namespace", "no-such-namespace"}, nil, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not found") {
		t.Errorf("missing namespace: exit %d, stderr %q; want kubectl's exit 1 and its NotFound", code, stderr.String())
	}
}

func TestClusterKubectlBadInput(t *testing.T) {
	testenv.NeedKubernetes(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no kubectl arguments"},
		{[]string{"-state-dir", t.TempDir(), "get", "pods"}, "no cluster in "},
		{[]string{"-state-dir"}, "flag needs an argument: -state-dir"},
		// kubectl's flags, even first, are kubectl's: here there is no cluster.
		{[]string{"-state-dir=" + t.TempDir(), "-n", "x", "get", "pods"}, "no cluster in "},
	} {
		var stdout, stderr bytes.Buffer
		code := clusterKubectl(c.args, nil, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != exitBadInput || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line with %q", c.args, code, stderr.String(), exitBadInput, c.want)
		}
	}
}
