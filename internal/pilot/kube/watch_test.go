package kube_test

// The tests here run after kube_test.go's, whose first test needs an API
// server without Istio's CRDs (go test runs files in name order).

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

// sliceSink records the last endpoints the source sent for each slice.
type sliceSink struct {
	mu      sync.Mutex
	bySlice map[string][]registry.SliceEndpoint
}

func (s *sliceSink) SetEndpointSlice(_ config.Key, slice string, eps []registry.SliceEndpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bySlice[slice] = eps
}

func (s *sliceSink) DeleteEndpointSlice(_ config.Key, slice string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.bySlice, slice)
}

// Pods as workloads are not what these tests watch.
func (s *sliceSink) SetPodWorkload(*registry.PodWorkload) {}
func (s *sliceSink) DeletePodWorkload(_, _ string)        {}

// describe is the slice's endpoints as "ADDRESS sa=SA app=APP", or
// "absent".
func (s *sliceSink) describe(slice string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	eps, ok := s.bySlice[slice]
	if !ok {
		return "absent"
	}
	var out []string
	for _, e := range eps {
		out = append(out, e.Address+" sa="+e.ServiceAccount+" app="+e.Labels["app"])
	}
	return strings.Join(out, ",")
}

// waitFor polls until the slice's endpoints read want; the informers
// deliver asynchronously.
func (s *sliceSink) waitFor(t *testing.T, slice, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.describe(slice) != want {
		if time.Now().After(deadline) {
			t.Fatalf("slice %s = %q, want %q", slice, s.describe(slice), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startSource starts a source on the server with a recording sink.
func startSource(t *testing.T, s *kubetest.Server) *sliceSink {
	t.Helper()
	installCRDs(t, s)
	src, err := kube.New(context.Background(), kube.Options{RESTConfig: s.RESTConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	sink := &sliceSink{bySlice: map[string][]registry.SliceEndpoint{}}
	if err := src.Start(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	return sink
}

// TestEndpointOfAnUnknownPodIsWithheld: an endpoint whose target Pod the
// pilot has not seen (created after its slice, or deleted before it) is
// left out, as istiod leaves it out: without the Pod there is no service
// account for the client's SAN check and no tlsMode label, so it would be
// sent as a plaintext endpoint of nobody. It appears once the Pod does.
func TestEndpointOfAnUnknownPodIsWithheld(t *testing.T) {
	s := kubetest.Start(t)
	sink := startSource(t, s)
	c := s.Client(t)
	ctx := context.Background()
	ns := s.NewNamespace(t, nil)
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "cart-a", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "cart"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "cart-1"}}},
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "cart-a", "")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cart-1", Namespace: ns, Labels: map[string]string{"app": "cart"}},
		Spec: corev1.PodSpec{ServiceAccountName: "cart",
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:test"}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "cart-a", "10.1.0.5 sa=cart app=cart")

	// Relabelled: the endpoint carries the new labels.
	pod, err := c.CoreV1().Pods(ns).Get(ctx, "cart-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels["app"] = "cart-v2"
	if _, err := c.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "cart-a", "10.1.0.5 sa=cart app=cart-v2")

	// Deleted before its slice: the endpoint goes with it.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "cart-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "cart-a", "")
}
