package kubeload_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/cpload/kubeload"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/kube/kwok"
	"github.com/meshperf/meshperf/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// TestApplyOnKwok makes a 2 x 2 x 2 mesh real objects on kwok's nodes and
// checks what a control plane would see: every pod Running with a kwok IP,
// each Service's EndpointSlices holding exactly its pods' IPs, a deleted
// pod leaving its slice, and nothing of the run left after Delete.
func TestApplyOnKwok(t *testing.T) {
	s := kubetest.Start(t).WithControllerManager(t)
	bins := testenv.NeedKubernetes(t)
	c := s.Client(t)
	ctx := context.Background()
	run := "t1"
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 2, NamespacePrefix: "kl-" + run + "-", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kwok.Start(kwok.Options{Bins: bins, Kubeconfig: s.Kubeconfig(t), Run: run, LogPath: filepath.Join(t.TempDir(), "kwok.log"), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	nodes, err := k.CreateNodes(ctx, c, 2, 110, time.Minute)
	t.Cleanup(func() { _ = k.DeleteNodes(context.Background(), c) })
	if err != nil {
		t.Fatal(err)
	}
	proxies, timing, err := kubeload.Apply(ctx, c, m, kubeload.Options{Run: run, Nodes: nodes, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created in %s, ready in %s", timing.Create, timing.Ready)
	if len(proxies) != 8 {
		t.Fatalf("%d proxies, want 8", len(proxies))
	}
	want := map[string][]string{} // namespace/service -> pod IPs
	seen := map[string]bool{}
	for _, p := range proxies {
		ip, err := netip.ParseAddr(p.IP)
		if err != nil || !k.CIDR().Contains(ip) {
			t.Fatalf("proxy %s/%s has IP %q, not in kwok's %s", p.Namespace, p.Name, p.IP, k.CIDR())
		}
		if seen[p.IP] {
			t.Fatalf("IP %s given twice", p.IP)
		}
		seen[p.IP] = true
		key := p.Namespace + "/" + p.Labels["app"]
		want[key] = append(want[key], p.IP)
	}
	for key, ips := range want {
		waitSliceIPs(t, c, key, ips)
	}

	// Endpoint churn: a deleted pod leaves its service's slice.
	gone := proxies[0]
	if err := c.CoreV1().Pods(gone.Namespace).Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	key := gone.Namespace + "/" + gone.Labels["app"]
	waitSliceIPs(t, c, key, slices.DeleteFunc(slices.Clone(want[key]), func(ip string) bool { return ip == gone.IP }))

	if err := kubeload.Delete(ctx, c, run, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteNodes(ctx, c); err != nil {
		t.Fatal(err)
	}
	nsList, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nsList.Items {
		if strings.HasPrefix(ns.Name, "kl-"+run+"-") {
			t.Errorf("namespace %s left after Delete (phase %s)", ns.Name, ns.Status.Phase)
		}
	}
	nodeList, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodeList.Items) != 0 {
		t.Errorf("%d nodes left after DeleteNodes, e.g. %s", len(nodeList.Items), nodeList.Items[0].Name)
	}
}

// waitSliceIPs waits until the ready endpoints of the service's
// EndpointSlices are exactly ips.
func waitSliceIPs(t *testing.T, c kubernetes.Interface, nsSvc string, ips []string) {
	t.Helper()
	ns, svc, _ := strings.Cut(nsSvc, "/")
	want := slices.Sorted(slices.Values(ips))
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					got = append(got, ep.Addresses...)
				}
			}
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("service %s: EndpointSlice addresses %v, want the pods' %v", nsSvc, got, want)
}
