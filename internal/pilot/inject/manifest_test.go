package inject

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/testutil"
)

var manifestOptions = Options{ImageRepo: "meshperf.local", Tag: "v0.1.0", PullPolicy: corev1.PullNever}

func TestManifestGolden(t *testing.T) {
	got, err := ManifestYAML(ManifestOptions{Injection: manifestOptions})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "manifest.yaml"), got)
}

// TestManifestValidatesOnAPIServer has the API server validate every object
// (schemas, RBAC rules, the webhook's selectors) without keeping any. The
// namespace is one that exists: a dry-run namespace is not there for the
// objects in it.
func TestManifestValidatesOnAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	ns := s.NewNamespace(t, nil)
	doc, err := ManifestYAML(ManifestOptions{Namespace: ns, Injection: manifestOptions})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Kubectl(t, doc, "apply", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{"namespace/" + ns, "serviceaccount/meshperf-pilot", "clusterrole.rbac.authorization.k8s.io/meshperf-pilot",
		"deployment.apps/meshperf-pilot", "service/meshperf-pilot", "mutatingwebhookconfiguration.admissionregistration.k8s.io/meshperf-sidecar-injector"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl did not report %s:\n%s", want, out)
		}
	}
}

// TestManifestRBACLetsThePilotDoItsJob applies the manifest for real and
// acts as the pilot's service account: it may keep the webhook's caBundle,
// keep the CA's root in its Secret and review tokens; it may not touch
// another webhook configuration or another Secret.
func TestManifestRBACLetsThePilotDoItsJob(t *testing.T) {
	s := kubetest.Start(t)
	admin := s.Client(t)
	ns := s.NewNamespace(t, nil)
	doc, err := ManifestYAML(ManifestOptions{Namespace: ns, Injection: manifestOptions})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Kubectl(t, doc, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// Cluster-wide: it would send the other tests' pods to a pilot
		// that is not running.
		_, _ = s.Kubectl(t, nil, "delete", "mutatingwebhookconfiguration/"+WebhookConfigName, "clusterrole/"+PilotName, "clusterrolebinding/"+PilotName)
	})
	pilot := s.ClientAs(t, ns, PilotName)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	authority, err := ca.Open(filepath.Join(t.TempDir(), "ca"), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	patcher := NewCABundlePatcher(pilot, WebhookConfigName, authority.RootPEM(), nil)
	done := make(chan error, 1)
	go func() { done <- patcher.Run(ctx) }()
	caBundle := func() error {
		cfg, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, WebhookConfigName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, authority.RootPEM()) {
			return errors.New("the caBundle is not the pilot's root")
		}
		return nil
	}
	testutil.Eventually(t, 30*time.Second, caBundle)

	// Someone re-applies the manifest (no caBundle): the patcher puts it back.
	if out, err := s.Kubectl(t, doc, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply again: %v\n%s", err, out)
	}
	cfg, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, WebhookConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks[0].ClientConfig.CABundle = []byte("stale")
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, caBundle)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("patcher: %v", err)
	}

	// The CA's root, in its namespace's Secret.
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := ca.RestoreRoot(context.Background(), pilot, ns, ca.KubeRootSecretName, dir); err != nil {
		t.Fatalf("RestoreRoot as the pilot: %v", err)
	}
	if _, err := ca.Open(dir, "cluster.local"); err != nil {
		t.Fatal(err)
	}
	if err := ca.SaveRoot(context.Background(), pilot, ns, ca.KubeRootSecretName, dir); err != nil {
		t.Fatalf("SaveRoot as the pilot: %v", err)
	}
	if found, err := ca.RestoreRoot(context.Background(), pilot, ns, ca.KubeRootSecretName, dir); err != nil || !found {
		t.Fatalf("RestoreRoot as the pilot after saving: %v, %v", found, err)
	}

	// Token reviews for the certificate API.
	if _, err := pilot.AuthenticationV1().TokenReviews().Create(context.Background(), &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("the pilot may not review tokens: %v", err)
	}

	// And no more than that.
	if _, err := pilot.CoreV1().Secrets(ns).Get(context.Background(), "other", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("reading another secret: %v, want forbidden", err)
	}
	if _, err := pilot.CoreV1().Secrets("default").List(context.Background(), metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("listing secrets: %v, want forbidden", err)
	}
	if _, err := pilot.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(context.Background(), WebhookConfigName, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("patching the webhook configuration (the patcher updates): %v, want forbidden", err)
	}
	if _, err := pilot.CoreV1().Pods(ns).Get(context.Background(), "any", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("getting a pod (informers only list and watch): %v, want forbidden", err)
	}
	// --install-crds applies (create, patch) and gets Istio's CRDs, and
	// nothing else.
	for verb, want := range map[string]bool{"get": true, "create": true, "patch": true, "list": false, "watch": false, "update": false, "delete": false} {
		review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + PilotName, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != want {
			t.Errorf("the pilot may %s customresourcedefinitions: %v, want %v", verb, review.Status.Allowed, want)
		}
	}
	if err := pilot.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), WebhookConfigName, metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("deleting the webhook configuration: %v, want forbidden", err)
	}
}
