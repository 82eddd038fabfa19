package driver_test

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/testenv"
)

// TestRunIstiodOnKube runs cpload --kube -istiod at 2 x 2 x 2 on a real API
// server with the controller manager and kwok: the user's istiod reads the
// mesh, every simulated proxy gets its first config from it, config churn
// written through the API server (a ServiceEntry renamed) reaches every
// proxy, istiod's metrics count the pushes, the provenance names istiod,
// and the cluster holds afterwards exactly what it held before (istiod's
// namespace, leases and ConfigMaps gone with the run's namespaces).
func TestRunIstiodOnKube(t *testing.T) {
	bin := testenv.NeedIstiod(t)
	s := kubetest.Start(t).WithControllerManager(t)
	before := clusterObjects(t, s)
	r := runConfigChurnOnKube(t, s, "cpi-", &driver.KubeOptions{Kubeconfig: s.Kubeconfig(t), Istiod: bin}, nil)
	if got := r.Provenance.ControlPlane.Name; got != "istiod" || r.Provenance.ControlPlane.Version == "" {
		t.Errorf("control plane in the provenance: %+v, want istiod with its version", r.Provenance.ControlPlane)
	}
	if r.ControlPlane == nil || r.ControlPlane.Pushes == 0 {
		t.Errorf("istiod's metrics count no push for the churn: %+v", r.ControlPlane)
	}
	if r.Process == nil || r.Process.RSSMaxMB == 0 {
		t.Errorf("istiod's memory was not sampled: %+v", r.Process)
	}
	after := clusterObjects(t, s)
	for _, o := range after {
		if !slices.Contains(before, o) {
			t.Errorf("%s left in the cluster after the run", o)
		}
	}
}

// clusterObjects names every object of the kinds a run or istiod creates.
func clusterObjects(t *testing.T, s *kubetest.Server) []string {
	t.Helper()
	dc, err := dynamic.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "namespaces"}, {Version: "v1", Resource: "nodes"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "pods"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	} {
		list, err := dc.Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out = append(out, gvr.Resource+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	return out
}
