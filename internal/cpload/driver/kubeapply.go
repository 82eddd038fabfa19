package driver

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	istionet "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/cpload/kubeload"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// kubeApplier is churn on Kubernetes, through the API server as a user's
// change would come, so that a change's end to end is measured the same
// way whichever control plane watches the cluster. Endpoint churn's
// WorkloadEntries become pods on a kwok node (kwok gives each an IP and
// makes it Ready, the controller manager puts it in its Service's
// EndpointSlice, the control plane's informer sees that), and their
// deletion the pod's. Istio's kinds are written with istio.io/client-go,
// Services with client-go.
type kubeApplier struct {
	core  kubernetes.Interface
	istio istioclient.Interface
	node  string

	mu sync.Mutex
	// versions are the resourceVersions of the objects this applier last
	// wrote, so that an update of the same object (config churn renames
	// one ServiceEntry at a rate) is one request, not a read and a write.
	versions map[config.Key]string
}

func newKubeApplier(core kubernetes.Interface, istio istioclient.Interface, node string) *kubeApplier {
	return &kubeApplier{core: core, istio: istio, node: node, versions: map[config.Key]string{}}
}

// Apply creates or updates each of rs.
func (a *kubeApplier) Apply(ctx context.Context, rs []*config.Resource) error {
	for _, r := range rs {
		if err := a.apply(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (a *kubeApplier) apply(ctx context.Context, r *config.Resource) error {
	ns, meta := r.Meta.Namespace, *r.Meta.DeepCopy()
	var err error
	switch spec := r.Spec.(type) {
	case *networking.WorkloadEntry:
		pod := kubeload.Pod(sim.ProxySpec{Name: r.Meta.Name, Namespace: ns, Labels: spec.Labels}, a.node)
		_, err = a.core.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	case *corev1.ServiceSpec:
		err = write(ctx, a, r.Key(), a.core.CoreV1().Services(ns), &corev1.Service{ObjectMeta: meta, Spec: *spec.DeepCopy()})
	case *networking.ServiceEntry:
		o := &istionet.ServiceEntry{ObjectMeta: meta}
		proto.Merge(&o.Spec, spec)
		err = write(ctx, a, r.Key(), a.istio.NetworkingV1().ServiceEntries(ns), o)
	case *networking.VirtualService:
		o := &istionet.VirtualService{ObjectMeta: meta}
		proto.Merge(&o.Spec, spec)
		err = write(ctx, a, r.Key(), a.istio.NetworkingV1().VirtualServices(ns), o)
	case *networking.DestinationRule:
		o := &istionet.DestinationRule{ObjectMeta: meta}
		proto.Merge(&o.Spec, spec)
		err = write(ctx, a, r.Key(), a.istio.NetworkingV1().DestinationRules(ns), o)
	case *networking.Gateway:
		o := &istionet.Gateway{ObjectMeta: meta}
		proto.Merge(&o.Spec, spec)
		err = write(ctx, a, r.Key(), a.istio.NetworkingV1().Gateways(ns), o)
	case *networking.Sidecar:
		o := &istionet.Sidecar{ObjectMeta: meta}
		proto.Merge(&o.Spec, spec)
		err = write(ctx, a, r.Key(), a.istio.NetworkingV1().Sidecars(ns), o)
	default:
		return fmt.Errorf("--kube: changing a %s through the API server is not built", r.Kind)
	}
	if err != nil {
		return fmt.Errorf("writing %s %s/%s to the API server: %w", r.Kind, ns, r.Meta.Name, err)
	}
	return nil
}

// objectClient is what write needs of a typed client (client-go's,
// istio.io/client-go's).
type objectClient[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// write updates obj when the applier wrote it before (with the
// resourceVersion it got back), else creates it; an object that exists
// already, or changed since, is read once for its resourceVersion and
// updated.
func write[T metav1.Object](ctx context.Context, a *kubeApplier, key config.Key, c objectClient[T], obj T) error {
	a.mu.Lock()
	rv, known := a.versions[key]
	a.mu.Unlock()
	var got T
	var err error
	if known {
		obj.SetResourceVersion(rv)
		got, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	} else {
		got, err = c.Create(ctx, obj, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || (known && apierrors.IsNotFound(err)) {
		got, err = replace(ctx, c, obj)
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.versions[key] = got.GetResourceVersion()
	a.mu.Unlock()
	return nil
}

// replace writes obj over whatever the API server has of its name.
func replace[T metav1.Object](ctx context.Context, c objectClient[T], obj T) (T, error) {
	cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj.SetResourceVersion("")
		return c.Create(ctx, obj, metav1.CreateOptions{})
	}
	if err != nil {
		return cur, err
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	return c.Update(ctx, obj, metav1.UpdateOptions{})
}

// Delete deletes each of rs; one already gone is not an error.
func (a *kubeApplier) Delete(ctx context.Context, rs []*config.Resource) error {
	for _, r := range rs {
		ns, name := r.Meta.Namespace, r.Meta.Name
		var err error
		switch r.Kind {
		case config.KindWorkloadEntry:
			err = a.core.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindService:
			err = a.core.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindServiceEntry:
			err = a.istio.NetworkingV1().ServiceEntries(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindVirtualService:
			err = a.istio.NetworkingV1().VirtualServices(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindDestinationRule:
			err = a.istio.NetworkingV1().DestinationRules(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindGateway:
			err = a.istio.NetworkingV1().Gateways(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case config.KindSidecar:
			err = a.istio.NetworkingV1().Sidecars(ns).Delete(ctx, name, metav1.DeleteOptions{})
		default:
			return fmt.Errorf("--kube: deleting a %s through the API server is not built", r.Kind)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s from the API server: %w", r.Kind, ns, name, err)
		}
		a.mu.Lock()
		delete(a.versions, r.Key())
		a.mu.Unlock()
	}
	return nil
}

// ConfigDumpBytes is unknown through the API server.
func (a *kubeApplier) ConfigDumpBytes(context.Context, string) int64 { return 0 }
