package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// ErrCRDsMissing matches the error for a cluster without Istio's CRDs.
var ErrCRDsMissing = errors.New("the cluster lacks Istio's CRDs")

// istioVersion is the version the pilot watches each Istio group at: v1, the
// version every Istio since 1.22 serves and stores.
const istioVersion = "v1"

// istioResources are the Istio CRDs the pilot needs, one per kind it reads.
var istioResources = []Resource{
	{"networking.istio.io", "serviceentries"}, {"networking.istio.io", "workloadentries"},
	{"networking.istio.io", "virtualservices"}, {"networking.istio.io", "destinationrules"},
	{"networking.istio.io", "gateways"}, {"networking.istio.io", "sidecars"},
	{"security.istio.io", "peerauthentications"}, {"security.istio.io", "authorizationpolicies"},
}

// gatewayAPIGateways is the Gateway API's Gateway, watched only when its CRD
// is installed (it declares waypoints; clusters without the Gateway API have
// no waypoints to declare).
var gatewayAPIGateways = Resource{config.GatewayAPIGroup, "gateways"}

// served says which of the resources the API server serves at version,
// asking its discovery endpoints (open to every authenticated user, so no
// RBAC on CRDs is needed just to look).
func served(cs kubernetes.Interface, version string, resources []Resource) (map[Resource]bool, error) {
	out := map[Resource]bool{}
	groups := map[string]bool{}
	for _, r := range resources {
		groups[r.Group] = true
	}
	for group := range groups {
		list, err := cs.Discovery().ServerResourcesForGroupVersion(group + "/" + version)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list the API server's resources in %s/%s: %w", group, version, err)
		}
		for _, ar := range list.APIResources {
			out[Resource{group, ar.Name}] = true
		}
	}
	return out, nil
}

// checkCRDs fails with one line naming the Istio CRDs the cluster lacks and
// how to install them.
func checkCRDs(cs kubernetes.Interface) error {
	have, err := served(cs, istioVersion, istioResources)
	if err != nil {
		return err
	}
	var missing []string
	for _, r := range istioResources {
		if !have[r] {
			missing = append(missing, r.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	path, perr := crdmanifest.Istio.Path()
	if perr != nil {
		path = "<Istio's customresourcedefinitions.gen.yaml>"
	}
	return fmt.Errorf("%w (not served at %s): %s; run meshperf pilot --install-crds or kubectl apply -f %s",
		ErrCRDsMissing, istioVersion, strings.Join(missing, ", "), path)
}

// fieldManager is the pilot's name in server-side apply's managed fields.
const fieldManager = "meshperf-pilot"

// DefaultEstablishTimeout bounds the wait for installed CRDs to be served.
const DefaultEstablishTimeout = 30 * time.Second

// InstallManifest installs m's CRDs on the cluster cfg reaches, from path,
// else from where m.Path finds them, as InstallCRDs does within
// DefaultEstablishTimeout. It returns the CRDs' names and the manifest it
// read.
func InstallManifest(ctx context.Context, cfg *rest.Config, m crdmanifest.Manifest, path string) ([]string, string, error) {
	if path == "" {
		var err error
		if path, err = m.Path(); err != nil {
			return nil, "", err
		}
	}
	client, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	names, err := InstallCRDs(ctx, client, path, DefaultEstablishTimeout)
	return names, path, err
}

// InstallCRDs applies a CRD manifest, Istio's or the Gateway API's
// (server-side apply, so that a second install, or one over kubectl's,
// converges instead of failing), and waits until every CRD in it is
// Established and served by discovery: discovery lists a CRD a moment after
// it is Established, and a caller that asks in between (informers,
// `served`) would find its kind missing. It returns the CRDs' names.
func InstallCRDs(ctx context.Context, client apiextensions.Interface, manifest string, timeout time.Duration) ([]string, error) {
	crds, err := readCRDs(manifest)
	if err != nil {
		return nil, err
	}
	force := true
	var names []string
	for _, crd := range crds {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, crd.json,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
		if err != nil {
			return nil, fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, name := range names {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil // retried until the deadline, which names the CRD
			}
			return established(crd) && discovered(client, crd), nil
		})
		if err != nil {
			return nil, fmt.Errorf("CRD %s was not Established and served within %s", name, timeout)
		}
	}
	return names, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// discovered says whether the API server's discovery lists crd's resource
// at each version it serves.
func discovered(client apiextensions.Interface, crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		list, err := client.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
		if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
			return false
		}
	}
	return true
}

// manifestCRD is one CRD of the manifest: its name and the document as
// JSON, applied as written (not re-encoded from Go types, which would add
// empty fields the manifest does not set).
type manifestCRD struct {
	Name string
	json []byte
}

// readCRDs decodes every CustomResourceDefinition of a multi-document
// manifest, strictly, so that a manifest whose CRD schema this build does
// not know fails here, not half-applied.
func readCRDs(path string) ([]manifestCRD, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the CRD manifest: %w", err)
	}
	var out []manifestCRD
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if crd.Kind == "" && crd.Name == "" {
			continue // a comment-only document
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: document %d: kind %q, want CustomResourceDefinition", path, i+1, crd.Kind)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		out = append(out, manifestCRD{Name: crd.Name, json: js})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no CustomResourceDefinition", path)
	}
	return out, nil
}
