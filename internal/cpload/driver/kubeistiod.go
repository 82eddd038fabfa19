package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/meshperf/meshperf/internal/cpload/istiod"
	"github.com/meshperf/meshperf/internal/cpload/kubeload"
	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	pilotkube "github.com/meshperf/meshperf/internal/pilot/kube"
)

// istiodManager is the field manager of what istiod writes: the
// user-agent client-go gives pilot-discovery's requests.
const istiodManager = "pilot-discovery"

// istiodWrites are the kinds istiod creates objects of in a cluster (its
// leader-election leases, the root-certificate ConfigMaps, webhook
// configurations it patches), looked through after a run for what it made.
var istiodWrites = []schema.GroupVersionResource{
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// kubeIstiod is istiod reading a run's API server, and what to undo.
type kubeIstiod struct {
	i        *istiod.Istiod
	k        *kubeRun
	before   map[types.UID]bool // objects of istiodWrites before istiod started
	progress func(format string, args ...any)
}

// startIstiod makes the user's istiod the run's control plane on the API
// server, in place of meshperf pilot: Istio's CRDs served (installed from
// the istio.io/api module's manifest when missing, as the pilot's
// --install-crds), its namespace (created for the run, and so deleted
// with the run's namespaces, unless there is one), then pilot-discovery
// with the run's kubeconfig and the knobs. c becomes a run against it:
// its xDS and metrics, its process for CPU and memory, no secrets asked
// for (istiod's sidecars get theirs from istio-agent), istiod and its
// version in the provenance.
func (k *kubeRun) startIstiod(ctx context.Context, c *Config) (*kubeIstiod, error) {
	version, err := istiod.Version(ctx, c.Kube.Istiod)
	if err != nil {
		return nil, err
	}
	// An installed istiod would share the run's leader elections and
	// objects in its namespace, and push to its own proxies from the same
	// API server: the run would measure neither.
	if _, err := k.client.AppsV1().Deployments(istiod.Namespace).Get(ctx, "istiod", metav1.GetOptions{}); err == nil {
		return nil, fmt.Errorf("the cluster runs Istio already (Deployment %s/istiod): -istiod needs a cluster without it", istiod.Namespace)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("checking for an installed istiod: %w", err)
	}
	if err := k.ensureIstioCRDs(ctx); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: istiod.Namespace, Labels: map[string]string{kubeload.RunLabel: k.run}}}
	if _, err := k.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s for istiod: %w", istiod.Namespace, err)
	}
	ki := &kubeIstiod{k: k, progress: c.progress}
	if ki.before, err = k.istiodObjects(ctx); err != nil {
		return nil, err
	}
	c.progress("starting istiod %s (%s) on the API server", version, c.Kube.Istiod)
	env := append(c.Knobs.env(), "POD_NAME=istiod-cpload-"+k.run, "REVISION=default", "KUBECONFIG="+c.Kube.Kubeconfig)
	ki.i, err = istiod.Start(ctx, istiod.Options{Path: c.Kube.Istiod, Source: istiod.KubeMode(c.Kube.Kubeconfig), Env: env, Dir: k.dir})
	if err != nil {
		// What it wrote before it failed goes as after a run.
		if derr := ki.deleteCreated(context.WithoutCancel(ctx)); derr != nil {
			err = fmt.Errorf("%w (and cleaning up after istiod: %v)", err, derr)
		}
		k.keepLogs = true
		return nil, err
	}
	c.Target, c.MetricsURL, c.TargetPID = ki.i.XDS, ki.i.MetricsURL, ki.i.PID()
	c.MeshName, c.MeshVersion = "istiod", version
	return ki, nil
}

// ensureIstioCRDs installs Istio's CRDs when the API server does not serve
// them, with the pilot's installer: istiod does not install them, and
// without them it waits for them and serves no Istio config.
func (k *kubeRun) ensureIstioCRDs(ctx context.Context) error {
	list, err := k.client.Discovery().ServerResourcesForGroupVersion("networking.istio.io/v1")
	if err == nil && len(list.APIResources) > 0 {
		return nil
	}
	if _, _, err := pilotkube.InstallManifest(ctx, k.rest, crdmanifest.Istio, ""); err != nil {
		return fmt.Errorf("installing Istio's CRDs for istiod: %w", err)
	}
	return nil
}

// istiodObjects are the UIDs of every object of istiodWrites.
func (k *kubeRun) istiodObjects(ctx context.Context) (map[types.UID]bool, error) {
	dc, err := dynamic.NewForConfig(k.rest)
	if err != nil {
		return nil, err
	}
	out := map[types.UID]bool{}
	for _, gvr := range istiodWrites {
		list, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for _, o := range list.Items {
			out[o.GetUID()] = true
		}
	}
	return out, nil
}

// stop stops istiod and deletes what it created: the objects of
// istiodWrites that were not there before it started and that istiod
// wrote (its field manager), outside the run's namespaces (deleted with
// them). Its namespace, when the run created it, goes with those.
func (ki *kubeIstiod) stop() {
	if ki.i.Exited() {
		fmt.Fprintf(os.Stderr, "cpload: %s\n", ki.i.ExitReason())
		ki.k.keepLogs = true
	}
	_ = ki.i.Stop()
	ctx := context.Background()
	if err := ki.deleteCreated(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "cpload: cleaning up after istiod: %v\n", err)
	}
}

func (ki *kubeIstiod) deleteCreated(ctx context.Context) error {
	dc, err := dynamic.NewForConfig(ki.k.rest)
	if err != nil {
		return err
	}
	var errs []error
	var deleted []string
	defer func() {
		if len(deleted) > 0 {
			ki.progress("deleted what istiod created: %s", strings.Join(deleted, ", "))
		}
	}()
	for _, gvr := range istiodWrites {
		list, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gvr.Resource, err))
			continue
		}
		for _, o := range list.Items {
			if ki.before[o.GetUID()] || !writtenBy(o.GetManagedFields(), istiodManager) {
				continue
			}
			err := dc.Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s %s/%s: %w", gvr.Resource, o.GetNamespace(), o.GetName(), err))
				continue
			}
			deleted = append(deleted, gvr.Resource+" "+strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
		}
	}
	return errors.Join(errs...)
}

// writtenBy says whether manager (a client's user-agent, the part before
// its "/version") wrote any of the fields.
func writtenBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager || strings.HasPrefix(f.Manager, manager+"/") {
			return true
		}
	}
	return false
}
