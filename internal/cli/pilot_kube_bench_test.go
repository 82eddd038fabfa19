package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
	"github.com/meshperf/meshperf/internal/testutil"
)

// BenchmarkPilotStartOnKubernetes measures meshperf pilot's start on a
// real API server: the time from start to its ready file (informers synced,
// the first snapshot built; ns/op, with stopping excluded) and its RSS then
// (MB-rss), on an empty cluster and on one of 100 Services with 1000 pods
// in their EndpointSlices over 10 Nodes:
//
//	go test ./internal/cli -run '^$' -bench PilotStartOnKubernetes -benchtime 3x
func BenchmarkPilotStartOnKubernetes(b *testing.B) {
	api := kubetest.Start(b)
	bin := testutil.MeshperfBinary(b)
	// Installed first, so that what is measured is the pilot's own start.
	src, err := kube.New(context.Background(), kube.Options{RESTConfig: api.RESTConfig(), InstallCRDs: true})
	if err != nil {
		b.Fatal(err)
	}
	_ = src.Close()
	b.Run("empty", func(b *testing.B) { benchmarkPilotStart(b, bin, api) })
	b.Run("100-services-1000-pods", func(b *testing.B) {
		populate(b, api.Client(b), api.NewNamespace(b, nil), 100, 10, 10)
		benchmarkPilotStart(b, bin, api)
	})
}

// benchmarkPilotStart starts the binary's pilot on the cluster b.N times,
// timing each start until it is ready, and reports its mean RSS then.
func benchmarkPilotStart(b *testing.B, bin string, api *kubetest.Server) {
	kubeconfig := api.Kubeconfig(b)
	var rss uint64
	b.ResetTimer()
	for range b.N {
		p, err := proc.StartPilot(context.Background(), proc.PilotOptions{
			Command: []string{bin, "pilot", "--kubeconfig", kubeconfig}, DataDir: b.TempDir(), LogLevel: "warn",
		}, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		sample, err := procstat.Read(p.PID())
		_ = p.Stop()
		if err != nil {
			b.Fatal(err)
		}
		rss += sample.RSS
		b.StartTimer()
	}
	b.ReportMetric(float64(rss)/float64(b.N)/(1<<20), "MB-rss")
}

// populate writes what a cluster's controllers would hold for the
// services: each Service, its pods spread over the nodes, and one
// EndpointSlice with every pod ready.
func populate(t testing.TB, c kubernetes.Interface, ns string, services, podsPerService, nodes int) {
	t.Helper()
	ctx := context.Background()
	for n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-node-%d", ns, n), Labels: map[string]string{
			"topology.kubernetes.io/region": "region", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", n%3)}}}
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}) })
	}
	http, port := "http", int32(8080)
	ready := true
	for s := range services {
		name := fmt.Sprintf("svc-%d", s)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-a", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &http, Port: &port}},
		}
		for p := range podsPerService {
			podName := fmt.Sprintf("%s-%d", name, p)
			node := fmt.Sprintf("%s-node-%d", ns, (s*podsPerService+p)%nodes)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns, Labels: map[string]string{"app": name, "version": "v1"}},
				Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: name,
					Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:test"}}},
			}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 1+s/250, s%250, 1+p)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName},
				NodeName:   &node,
			})
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
