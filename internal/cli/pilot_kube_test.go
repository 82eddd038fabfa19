package cli

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	pilotapi "github.com/meshperf/meshperf/internal/pilot/api"
)

// pilotArgs are a pilot's flags on loopback port 0 with its data in dataDir.
func pilotArgs(dataDir string, args ...string) []string {
	return append([]string{"--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--log_output_level", "warn"}, args...)
}

// checkOneLineNothingLeft checks a refused start: the exit code, one line
// saying want, and an empty data directory (no store, no CA root).
func checkOneLineNothingLeft(t *testing.T, dataDir string, code, wantCode int, stderr, want string) {
	t.Helper()
	t.Logf("exit %d: %s", code, stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != wantCode || len(lines) != 1 || !strings.HasPrefix(lines[0], "meshperf pilot: ") || !strings.Contains(lines[0], want) {
		t.Errorf("exit %d (want %d), stderr %q (want one line saying %q)", code, wantCode, stderr, want)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Errorf("the refused start left %d entries in the data directory", len(entries))
	}
}

func TestPilotKubernetesBadInputIsOneLine(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // as outside a pod, whatever runs the tests
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubeconfig", missing}, "no kubeconfig: --kubeconfig " + missing + ": no such file or directory"},
		{[]string{"--kubeconfig", missing, "--configDir", t.TempDir()}, "--kubeconfig and --configDir are two sources of config: give one"},
		{[]string{"--install-crds"}, "--install-crds needs a cluster: give --kubeconfig, or run in a pod"},
	} {
		var stdout, stderr syncBuffer
		dataDir := t.TempDir()
		code := runPilot(context.Background(), pilotArgs(dataDir, tc.args...), &stdout, &stderr)
		checkOneLineNothingLeft(t, dataDir, code, exitBadInput, stderr.String(), tc.want)
	}
}

// TestPilotOnKubernetes: a pilot given a cluster checks it, installs
// Istio's CRDs when asked, is ready (its ready file written) once its
// informers have synced, and serves xDS; one whose credentials RBAC grants
// nothing is refused in one line, leaving nothing behind.
func TestPilotOnKubernetes(t *testing.T) {
	api := kubetest.Start(t)
	t.Run("served", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		readyFile := filepath.Join(t.TempDir(), "pilot.ready")
		var stdout, stderr syncBuffer
		done := make(chan int)
		go func() {
			done <- runPilot(ctx, pilotArgs(t.TempDir(), "--kubeconfig", api.Kubeconfig(t), "--install-crds", "--ready-file", readyFile), &stdout, &stderr)
		}()
		r := waitReadyFile(t, readyFile)
		getStatus(t, "http://"+r.Listeners["http"]+"/ready")
		requestClusters(t, r.Listeners["grpc"], insecure.NewCredentials())
		// The kubelet projects pods' tokens here: the pilot issues none.
		c, err := pilotapi.NewClient(r.Listeners["http"], nil)
		if err != nil {
			t.Fatal(err)
		}
		var se *pilotapi.StatusError
		if _, err := c.IssueToken(ctx, pilotapi.TokenRequest{Namespace: "shop", ServiceAccount: "cart"}); !errors.As(err, &se) || se.Code != http.StatusConflict {
			t.Errorf("a token asked of a pilot on Kubernetes: %v, want 409", err)
		}
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d after cancel; stderr %q", code, stderr.String())
		}
	})
	t.Run("no RBAC", func(t *testing.T) {
		ns := api.NewNamespace(t, nil)
		kubeconfig := serviceAccountKubeconfig(t, api, ns, "pilot")
		var stdout, stderr syncBuffer
		dataDir := t.TempDir()
		// The CRDs are there (the run above installed them), so what is
		// refused is the access.
		code := runPilot(context.Background(), pilotArgs(dataDir, "--kubeconfig", kubeconfig), &stdout, &stderr)
		checkOneLineNothingLeft(t, dataDir, code, exitFailed, stderr.String(),
			"service account "+ns+"/pilot may not list, watch namespaces; list, watch services;")
	})
}

// serviceAccountKubeconfig creates a service account that no binding
// grants anything and writes a kubeconfig with a token for it.
func serviceAccountKubeconfig(t *testing.T, api *kubetest.Server, ns, name string) string {
	t.Helper()
	c := api.Client(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: api.Host(), CertificateAuthorityData: api.CAPEM()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: name}
	cfg.CurrentContext = "kubetest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
