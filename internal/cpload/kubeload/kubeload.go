// Package kubeload makes a cpload shape's mesh real Kubernetes objects:
// its Namespaces, Services and ServiceAccounts, and its pods on kwok's fake
// nodes (internal/kube/kwok), so that a control plane reading the API
// server is driven by watch events (pods -> EndpointSlices by the
// controller manager -> its informers), as on a cluster. The simulated
// proxies then connect as those pods, with the IPs kwok gave them.
//
// Everything it creates carries RunLabel, so that Delete finds it again
// after a failure or Ctrl-C, and nothing of anyone else's is touched: a
// namespace of the shape that already exists is refused, not reused.
package kubeload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/kube/kwok"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// RunLabel marks the namespaces (and with them everything in them) a run
// created, and the pods it waits for, with the run's identity.
const RunLabel = "meshperf.io/cpload-run"

// Timing says how long the API objects took.
type Timing struct {
	Create time.Duration // every object created
	Ready  time.Duration // from the first create until every pod was Running with an IP
}

// Options says where the objects go.
type Options struct {
	Run     string   // the run's identity: RunLabel's value
	Nodes   []string // kwok's fake nodes; pods are spread over them in turn
	Timeout time.Duration
}

// Apply creates m's namespaces, services, service accounts and pods, waits
// until kwok has made every pod Running with an IP, and returns m's
// proxies with those IPs. On failure it deletes what it created.
func Apply(ctx context.Context, c kubernetes.Interface, m *shape.Mesh, o Options) (proxies []sim.ProxySpec, t Timing, err error) {
	if len(o.Nodes) == 0 || o.Run == "" {
		return nil, t, errors.New("kubeload: a run identity and at least one node are needed")
	}
	start := time.Now()
	defer func() {
		if err != nil {
			if derr := Delete(context.WithoutCancel(ctx), c, o.Run, o.Timeout); derr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, derr)
			}
		}
	}()
	if err := createNamespaces(ctx, c, m, o.Run); err != nil {
		return nil, t, err
	}
	if err := createServices(ctx, c, m); err != nil {
		return nil, t, err
	}
	if err := createPods(ctx, c, m, o.Run, o.Nodes); err != nil {
		return nil, t, err
	}
	t.Create = time.Since(start)
	proxies, err = waitPods(ctx, c, m, o.Run, o.Timeout)
	t.Ready = time.Since(start)
	return proxies, t, err
}

func createNamespaces(ctx context.Context, c kubernetes.Interface, m *shape.Mesh, run string) error {
	for _, r := range m.All() {
		if r.Kind != config.KindNamespace {
			continue
		}
		labels := map[string]string{RunLabel: run}
		for k, v := range r.Meta.Labels {
			labels[k] = v
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Meta.Name, Labels: labels}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("namespace %s already exists: cpload --kube creates its shape's namespaces and deletes them after; delete it or pick another shape", r.Meta.Name)
			}
			return fmt.Errorf("creating namespace %s: %w", r.Meta.Name, err)
		}
	}
	return nil
}

func createServices(ctx context.Context, c kubernetes.Interface, m *shape.Mesh) error {
	for _, r := range m.All() {
		if r.Kind != config.KindService {
			continue
		}
		spec, ok := r.Spec.(*corev1.ServiceSpec)
		if !ok {
			return fmt.Errorf("service %s/%s: spec is %T", r.Meta.Namespace, r.Meta.Name, r.Spec)
		}
		svc := &corev1.Service{ObjectMeta: *r.Meta.DeepCopy(), Spec: *spec.DeepCopy()}
		if _, err := c.CoreV1().Services(r.Meta.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating service %s/%s: %w", r.Meta.Namespace, r.Meta.Name, err)
		}
	}
	return nil
}

func createPods(ctx context.Context, c kubernetes.Interface, m *shape.Mesh, run string, nodes []string) error {
	accounts := map[[2]string]bool{}
	for i, p := range m.Proxies {
		if sa := p.ServiceAccount; sa != "" && !accounts[[2]string{p.Namespace, sa}] {
			accounts[[2]string{p.Namespace, sa}] = true
			obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: p.Namespace}}
			if _, err := c.CoreV1().ServiceAccounts(p.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating service account %s/%s: %w", p.Namespace, sa, err)
			}
		}
		pod := Pod(p, nodes[i%len(nodes)])
		pod.Labels[RunLabel] = run
		if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// Pod is the pod a simulated proxy stands for, bound to node (no scheduler
// is needed) and tolerating kwok's taint. Its container never runs.
func Pod(p sim.ProxySpec, node string) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: p.ServiceAccount,
			AutomountServiceAccountToken: new(bool),
			// Deleted at once: no kubelet stops a container, and a run's
			// cleanup must not wait on grace periods.
			TerminationGracePeriodSeconds: new(int64),
			Tolerations:                   []corev1.Toleration{kwok.Toleration},
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/pause",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Name: "http"}}}},
		},
	}
}

// waitPods waits until every proxy's pod is Running with an IP and returns
// the proxies with those IPs. It watches the run's pods (by RunLabel)
// with an informer and looks again at each event, rather than listing
// every pod of the shape's namespaces over and over: a thousand pods
// listed five times a second load the API server the run measures.
func waitPods(ctx context.Context, c kubernetes.Interface, m *shape.Mesh, run string, timeout time.Duration) ([]sim.ProxySpec, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = RunLabel + "=" + run
	}))
	defer func() {
		cancel() // stops the informer, which Shutdown then waits for
		f.Shutdown()
	}()
	pods := f.Core().V1().Pods()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) },
	}); err != nil {
		return nil, fmt.Errorf("watching the run's pods: %w", err)
	}
	f.Start(wctx.Done())
	lister := pods.Lister()
	out := make([]sim.ProxySpec, len(m.Proxies))
	copy(out, m.Proxies)
	done := 0 // out[:done] have their IPs
	for {
		for done < len(out) {
			p := &out[done]
			pod, err := lister.Pods(p.Namespace).Get(p.Name)
			if err != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
				break
			}
			p.IP = pod.Status.PodIP
			done++
		}
		if done == len(out) {
			return out, nil
		}
		select {
		case <-changed:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			missing := out[done]
			return nil, fmt.Errorf("pod %s/%s not Running with an IP after %s: is kwok running for its node?", missing.Namespace, missing.Name, timeout)
		}
	}
}

// Delete deletes the namespaces of run (and so everything in them) and
// waits until they are gone, or timeout.
func Delete(ctx context.Context, c kubernetes.Interface, run string, timeout time.Duration) error {
	sel := metav1.ListOptions{LabelSelector: RunLabel + "=" + run}
	list, err := c.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return fmt.Errorf("listing the run's namespaces: %w", err)
	}
	for _, ns := range list.Items {
		if err := c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		list, err := c.CoreV1().Namespaces().List(ctx, sel)
		if err != nil {
			return fmt.Errorf("listing the run's namespaces: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still there %s after deleting it", list.Items[0].Name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
