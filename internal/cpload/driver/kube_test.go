package driver_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/kubeload"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/kube/kwok"
)

// TestRunOnKube runs cpload --kube at 2 namespaces x 2 services x 2 pods on
// a real API server with the controller manager and kwok: meshperf pilot
// reads the mesh through its informers, every simulated proxy (connecting
// as a kwok pod, with its IP) gets its first config, and the run deletes
// its namespaces and nodes after. Endpoint churn (pods created and
// deleted, their EndpointSlices changed by the controller manager) reaches
// the proxies.
func TestRunOnKube(t *testing.T) {
	s := kubetest.Start(t).WithControllerManager(t)
	c := s.Client(t)
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 2, NamespacePrefix: "cpk-", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: m, Scoping: driver.ScopeNone,
		Churn: driver.ChurnEndpoints, Namespace: "cpk-0", Service: "svc-0", Rate: 10, Duration: time.Second,
		Kube: &driver.KubeOptions{Kubeconfig: s.Kubeconfig(t)}, PilotCommand: pilotCommand(t), Timeout: time.Minute, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	r.Print(&out)
	t.Log(out.String())
	if r.Proxies != 8 || r.Kube == nil || r.Kube.Pods != 8 || r.Kube.Nodes != 1 {
		t.Fatalf("report: %d proxies, kube %+v; want 8 proxies, 8 pods on 1 node", r.Proxies, r.Kube)
	}
	if r.Churn == nil || r.Churn.Changes != 10 || r.Churn.Missed != 0 {
		t.Errorf("endpoint churn (pods created and deleted): %+v, want 10 changes, none missed", r.Churn)
	}
	if r.ControlPlane == nil || r.ControlPlane.Pushes == 0 {
		t.Errorf("the pods' churn pushed nothing: %+v", r.ControlPlane)
	}
	if r.ConfigSize.SidecarMax == 0 {
		t.Errorf("no config reached the proxies: %+v", r.ConfigSize)
	}
	if r.ConfigSize.Workload != "" && !strings.Contains(r.ConfigSize.Workload, "cpk-") {
		t.Errorf("workload %q is not one of the mesh's pods", r.ConfigSize.Workload)
	}
	ns, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kubeload.RunLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Items) != 0 {
		t.Errorf("namespace %s left after the run", ns.Items[0].Name)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeAnnotation})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("node %s left after the run", nodes.Items[0].Name)
	}
}

// TestRunOnKubeConfigChurn churns config through the API server against
// meshperf pilot reading it: a ServiceEntry written with istio.io/client-go
// and renamed at a rate reaches every proxy through the pilot's informer,
// as the same churn reaches istiod (TestRunIstiodOnKube).
func TestRunOnKubeConfigChurn(t *testing.T) {
	s := kubetest.Start(t).WithControllerManager(t)
	r := runConfigChurnOnKube(t, s, "cpc-", &driver.KubeOptions{Kubeconfig: s.Kubeconfig(t)}, pilotCommand(t))
	if r.ControlPlane == nil || r.ControlPlane.Pushes == 0 {
		t.Errorf("the ServiceEntry's changes pushed nothing: %+v", r.ControlPlane)
	}
}

// runConfigChurnOnKube runs 2 x 2 x 2 pods (namespaces PREFIX0, PREFIX1) with 10
// config changes at 5/s through the API server, and checks that each
// reached all 8 proxies.
func runConfigChurnOnKube(t *testing.T, s *kubetest.Server, prefix string, k *driver.KubeOptions, pilot []string) *driver.Report {
	t.Helper()
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 2, NamespacePrefix: prefix, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: m, Scoping: driver.ScopeNone,
		Churn: driver.ChurnConfig, Namespace: prefix + "0", Rate: 5, Duration: 2 * time.Second,
		Kube: k, PilotCommand: pilot, Timeout: time.Minute, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	r.Print(&out)
	t.Log(out.String())
	if r.Proxies != 8 || r.Kube == nil || r.Kube.Pods != 8 {
		t.Fatalf("report: %d proxies, kube %+v; want 8 proxies and pods", r.Proxies, r.Kube)
	}
	if r.Churn == nil || r.Churn.Changes != 10 || r.Churn.Missed != 0 || r.Churn.Expected != 80 {
		t.Errorf("config churn through the API server: %+v, want 10 changes to 8 proxies, none missed", r.Churn)
	}
	return r
}
