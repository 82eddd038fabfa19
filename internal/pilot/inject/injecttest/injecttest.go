// Package injecttest deploys the pilot's manifest on a test's API server,
// for the tests that act as the pilot's service account.
package injecttest

import (
	"testing"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// ApplyManifest applies the pilot's manifest for namespace ns (its RBAC
// above all) with kubectl, and deletes its cluster-wide objects when t
// ends: the webhook configuration would send other tests' pods to a pilot
// that is not running.
func ApplyManifest(t *testing.T, s *kubetest.Server, ns string, opts inject.Options) {
	t.Helper()
	doc, err := inject.ManifestYAML(inject.ManifestOptions{Namespace: ns, Injection: opts})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Kubectl(t, doc, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, nil, "delete", "mutatingwebhookconfiguration/"+inject.WebhookConfigName, "clusterrole/"+inject.PilotName, "clusterrolebinding/"+inject.PilotName)
	})
}
