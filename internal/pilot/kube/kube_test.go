package kube_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/kube"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

func noEnv(string) string { return "" }

func TestRESTConfigWithoutKubeconfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	for _, tc := range []struct {
		name, path string
		getenv     func(string) string
		want       string
	}{
		{"path missing", missing, noEnv, "--kubeconfig " + missing + ": no such file or directory"},
		{"no path outside a pod", "", noEnv, "give --kubeconfig PATH, set KUBECONFIG, or run in a pod (neither KUBECONFIG nor HOME is set, and KUBERNETES_SERVICE_HOST is not set)"},
		{"KUBECONFIG's files all missing", "", env(map[string]string{"KUBECONFIG": missing + ":" + missing + "2"}),
			"(no file of KUBECONFIG=" + missing + ":" + missing + "2 exists, and KUBERNETES_SERVICE_HOST is not set)"},
		{"no ~/.kube/config", "", env(map[string]string{"HOME": t.TempDir()}), "KUBECONFIG is not set, no "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kube.RESTConfig(tc.path, tc.getenv)
			if !errors.Is(err, kube.ErrNoKubeconfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrNoKubeconfig saying %q", err, tc.want)
			}
		})
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// Without --kubeconfig the kubeconfig is found as kubectl finds it:
// KUBECONFIG's files merged in order (missing ones skipped), else
// ~/.kube/config; --kubeconfig, when given, is the only file read.
func TestRESTConfigFindsKubeconfigsAsKubectl(t *testing.T) {
	s := kubetest.Start(t)
	admin := s.Kubeconfig(t)
	full, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, edit func(*clientcmdapi.Config)) string {
		cfg := full.DeepCopy()
		edit(cfg)
		path := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Split in two: the clusters and users without a current context, and
	// a file that only chooses the context; only merged do they work.
	noContext := write("no-context", func(c *clientcmdapi.Config) { c.CurrentContext = "" })
	contextOnly := write("context-only", func(c *clientcmdapi.Config) {
		*c = *clientcmdapi.NewConfig()
		c.CurrentContext = "kubetest"
	})
	// Another server under the same names: the first file's value wins.
	elsewhere := write("elsewhere", func(c *clientcmdapi.Config) { c.Clusters["kubetest"].Server = "https://127.0.0.1:1" })
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(admin, filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent")
	want := s.RESTConfig().Host
	for _, tc := range []struct {
		name, path string
		vars       map[string]string
		host       string
	}{
		{"KUBECONFIG list merged", "", map[string]string{"KUBECONFIG": missing + ":" + contextOnly + ":" + noContext}, want},
		{"KUBECONFIG first file wins", "", map[string]string{"KUBECONFIG": noContext + ":" + elsewhere + ":" + contextOnly}, want},
		{"KUBECONFIG before ~/.kube/config", "", map[string]string{"KUBECONFIG": elsewhere, "HOME": home}, "https://127.0.0.1:1"},
		{"~/.kube/config without KUBECONFIG", "", map[string]string{"HOME": home}, want},
		{"--kubeconfig before KUBECONFIG", admin, map[string]string{"KUBECONFIG": elsewhere, "HOME": home}, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := kube.RESTConfig(tc.path, env(tc.vars))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host {
				t.Errorf("host %s, want %s", cfg.Host, tc.host)
			}
		})
	}
	// A merged configuration is a working one.
	cfg, err := kube.RESTConfig("", env(map[string]string{"KUBECONFIG": contextOnly + ":" + noContext}))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Reachable(context.Background(), cs, cfg.Host, 10*time.Second); err != nil {
		t.Error(err)
	}
}

func TestUnreachableAPIServerIsNamedWithinTheBound(t *testing.T) {
	// A port that was just free: nothing answers there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	host := "https://" + addr
	_, err = kube.New(context.Background(), kube.Options{RESTConfig: &rest.Config{Host: host}, ReachTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "the Kubernetes API server at "+host+" did not answer within 1s") {
		t.Fatalf("err = %v", err)
	}
}

// TestCRDsMissingThenInstalled runs first among the tests that need
// Istio's CRDs: the package's API server starts without them.
func TestCRDsMissingThenInstalled(t *testing.T) {
	s := kubetest.Start(t)
	_, err := kube.New(context.Background(), kube.Options{RESTConfig: s.RESTConfig()})
	if !errors.Is(err, kube.ErrCRDsMissing) {
		t.Fatalf("err = %v, want ErrCRDsMissing", err)
	}
	for _, want := range []string{"virtualservices.networking.istio.io", "peerauthentications.security.istio.io",
		"run meshperf pilot --install-crds or kubectl apply -f "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	src, err := kube.New(context.Background(), kube.Options{RESTConfig: s.RESTConfig(), InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	// Installed: a pilot without --install-crds now starts.
	src, err = kube.New(context.Background(), kube.Options{RESTConfig: s.RESTConfig()})
	if err != nil {
		t.Fatalf("after the install: %v", err)
	}
	_ = src.Close()
}

// TestMissingRBACNamesUserVerbsAndResources: a service account that no
// binding grants anything (RBAC denies by default) is refused with the
// verbs and resources it lacks.
func TestMissingRBACNamesUserVerbsAndResources(t *testing.T) {
	s := kubetest.Start(t)
	installCRDs(t, s)
	ns := s.NewNamespace(t, nil)
	c := s.Client(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pilot", Namespace: ns}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "pilot", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.RESTConfig()
	cfg.BearerToken = tok.Status.Token
	_, err = kube.New(ctx, kube.Options{RESTConfig: cfg, InstallCRDs: false})
	if err == nil {
		t.Fatal("a service account without bindings was let through")
	}
	// The CRDs check comes first and needs no RBAC (discovery is open to
	// every authenticated user).
	for _, want := range []string{"service account " + ns + "/pilot may not list, watch namespaces;",
		"list, watch endpointslices.discovery.k8s.io", "list, watch virtualservices.networking.istio.io",
		"ClusterRole meshperf-pilot of `meshperf pilot manifest`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// installCRDs installs Istio's CRDs as the administrator (a second install
// changes nothing).
func installCRDs(t *testing.T, s *kubetest.Server) {
	t.Helper()
	src, err := kube.New(context.Background(), kube.Options{RESTConfig: s.RESTConfig(), InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
}
