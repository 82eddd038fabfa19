package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
)

// measureScaleEnv names the meshperf binary to measure: the pilot's time
// from start to its first snapshot (ready: informers synced, the first
// push built) and its RSS then, on a cluster of 100 Services with 1000
// pods in their EndpointSlices. It is a measurement, not a pass/fail
// test, so it runs only when asked:
//
//	MESHPERF_MEASURE_KUBE_SCALE=$PWD/bin/meshperf go test ./internal/cli -run KubernetesScale -v
const measureScaleEnv = "MESHPERF_MEASURE_KUBE_SCALE"

func TestPilotKubernetesScaleMeasurement(t *testing.T) {
	bin := os.Getenv(measureScaleEnv)
	if bin == "" {
		t.Skip("a measurement: set " + measureScaleEnv + " to a meshperf binary to run it")
	}
	api := kubetest.Start(t)
	c := api.Client(t)
	// Installed first, so that what is measured is the pilot's own start.
	src, err := kube.New(context.Background(), kube.Options{RESTConfig: api.RESTConfig(), InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	ready, rss := measurePilotStart(t, bin, api)
	t.Logf("meshperf pilot on an empty cluster: start to first snapshot (synced, ready) %s; RSS then %s", ready, rss)

	ns := api.NewNamespace(t, nil)
	const services, podsPerService, nodes = 100, 10, 10
	begin := time.Now()
	populate(t, c, ns, services, podsPerService, nodes)
	t.Logf("created %d Services, %d Pods, %d EndpointSlices, %d Nodes in %s", services, services*podsPerService, services, nodes, time.Since(begin).Round(time.Millisecond))
	ready, rss = measurePilotStart(t, bin, api)
	t.Logf("meshperf pilot with them: start to first snapshot (synced, ready) %s; RSS then %s", ready, rss)
}

// measurePilotStart runs the binary's pilot on the cluster until it is
// ready, and returns how long that took and its RSS then.
func measurePilotStart(t *testing.T, bin string, api *kubetest.Server) (time.Duration, string) {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "pilot.ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "pilot", "--kubeconfig", api.Kubeconfig(t),
		"--dataDir", t.TempDir(), "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--log_output_level", "warn", "--ready-file", readyFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second) // a hang guard
	for {
		if _, err := proc.ReadReady(readyFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready file within 60s; stderr: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ready := time.Since(start).Round(time.Millisecond)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rss, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return ready, strings.TrimSpace(rss)
		}
	}
	return ready, "unknown"
}

// populate writes what a cluster's controllers would hold for the
// services: each Service, its pods spread over the nodes, and one
// EndpointSlice with every pod ready.
func populate(t *testing.T, c kubernetes.Interface, ns string, services, podsPerService, nodes int) {
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
