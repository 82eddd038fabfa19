package ca_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// rootIn is namespace ns's root ConfigMap's root-cert.pem, "absent" without
// the ConfigMap.
func rootIn(t *testing.T, c kubernetes.Interface, ns string) string {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), ca.RootConfigMapName, metav1.GetOptions{})
	if err != nil {
		return "absent"
	}
	return cm.Data[ca.RootConfigMapKey]
}

func waitRoot(t *testing.T, c kubernetes.Interface, ns, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rootIn(t, c, ns) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s root-cert.pem = %q, want %q", ns, ca.RootConfigMapName, rootIn(t, c, ns), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRootPublishedToEveryNamespace: istio-ca-root-cert appears in existing
// and new namespaces, is restored after an edit or a delete, and is not
// written to a skipped namespace.
func TestRootPublishedToEveryNamespace(t *testing.T) {
	s := kubetest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	before := s.NewNamespace(t, nil)
	skipped := s.NewNamespace(t, nil)
	// Another CA's root (istiod's, say) is there first: it is not ours
	// to replace.
	istios := s.NewNamespace(t, nil)
	const istioRoot = "-----BEGIN CERTIFICATE-----\nistio\n-----END CERTIFICATE-----\n"
	if _, err := c.CoreV1().ConfigMaps(istios).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ca.RootConfigMapName, Labels: map[string]string{"istio.io/config": "true"}},
		Data:       map[string]string{ca.RootConfigMapKey: istioRoot},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const root = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ca.NewRootPublisher(c, []byte(root), []string{skipped}, nil).Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	waitRoot(t, c, before, root)
	after := s.NewNamespace(t, nil)
	waitRoot(t, c, after, root)

	cm, err := c.CoreV1().ConfigMaps(after).Get(ctx, ca.RootConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["istio.io/config"] != "true" || cm.Labels[ca.RootConfigMapOwnerLabel] != "meshperf-pilot" {
		t.Errorf("labels = %v, want istio.io/config=true and %s=meshperf-pilot", cm.Labels, ca.RootConfigMapOwnerLabel)
	}
	cm.Data[ca.RootConfigMapKey] = "edited"
	if _, err := c.CoreV1().ConfigMaps(after).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoot(t, c, after, root)
	if err := c.CoreV1().ConfigMaps(before).Delete(ctx, ca.RootConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoot(t, c, before, root)

	if got := rootIn(t, c, istios); got != istioRoot {
		t.Errorf("another CA's root in %s was replaced: %q", istios, got)
	}
	if got := rootIn(t, c, skipped); got != "absent" {
		t.Errorf("the skipped namespace %s has the root ConfigMap: %q", skipped, got)
	}
}
