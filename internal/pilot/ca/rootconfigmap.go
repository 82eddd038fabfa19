package ca

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meshperf/meshperf/internal/kube/controllers"
)

// The ConfigMap istiod publishes its root in, in every namespace: proxies
// (istio-agent mounts it) and users look for it there.
const (
	RootConfigMapName = "istio-ca-root-cert"
	RootConfigMapKey  = "root-cert.pem"
	// rootConfigMapLabel is istiod's mark on the ConfigMaps it owns.
	rootConfigMapLabel = "istio.io/config"
	// RootConfigMapOwnerLabel marks the ConfigMaps meshperf pilot wrote:
	// only those it rewrites, so that it never replaces another CA's root
	// (istiod's, in a cluster that runs Istio too).
	RootConfigMapOwnerLabel = "meshperf.io/ca-root"
	rootConfigMapOwner      = "meshperf-pilot"
)

// RootPublisher keeps ConfigMap istio-ca-root-cert, key root-cert.pem, the
// CA's root in every namespace but the skipped ones, as istiod's namespace
// controller does: written when a namespace appears, rewritten when the
// ConfigMap is edited or deleted.
type RootPublisher struct {
	client kubernetes.Interface
	root   string
	skip   []string
	log    *slog.Logger
}

// NewRootPublisher publishes rootPEM to every namespace not in skip.
func NewRootPublisher(client kubernetes.Interface, rootPEM []byte, skip []string, log *slog.Logger) *RootPublisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RootPublisher{client: client, root: string(rootPEM), skip: slices.Clone(skip), log: log}
}

// Run publishes until ctx ends. A namespace whose write fails is retried
// with backoff, logged, without stopping the others.
func (p *RootPublisher) Run(ctx context.Context) error {
	nsFactory := informers.NewSharedInformerFactory(p.client, 0)
	cmFactory := informers.NewSharedInformerFactoryWithOptions(p.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", RootConfigMapName).String()
		}))
	nsInf := nsFactory.Core().V1().Namespaces().Informer()
	cmInf := cmFactory.Core().V1().ConfigMaps().Informer()
	queue := controllers.NewQueue(func(ctx context.Context, ns string) error {
		return p.publish(ctx, nsInf.GetIndexer(), cmInf.GetIndexer(), ns)
	}, func(ns string, err error) {
		p.log.Warn("root certificate not published", "namespace", ns, "configmap", RootConfigMapName, "error", err)
	})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			queue.Add(o.Name)
		case *corev1.ConfigMap:
			queue.Add(o.Namespace)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
	for _, inf := range []cache.SharedIndexInformer{nsInf, cmInf} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch for %s: %w", RootConfigMapName, err)
		}
	}
	nsFactory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	defer nsFactory.Shutdown()
	defer cmFactory.Shutdown()
	queue.Run(ctx)
	return nil
}

// publishTimeout bounds one write, so that an API server that stopped
// answering holds up one namespace, not the queue for ever.
const publishTimeout = 30 * time.Second

// publish makes namespace ns's ConfigMap hold the root, from what the
// informers hold: nothing for a namespace gone, being deleted or skipped,
// or whose ConfigMap already holds it.
func (p *RootPublisher) publish(ctx context.Context, namespaces, configMaps cache.Indexer, ns string) error {
	obj, ok, err := namespaces.GetByKey(ns)
	if err != nil || !ok || slices.Contains(p.skip, ns) {
		return err
	}
	if n, _ := obj.(*corev1.Namespace); n == nil || n.Status.Phase == corev1.NamespaceTerminating {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	api := p.client.CoreV1().ConfigMaps(ns)
	obj, ok, err = configMaps.GetByKey(ns + "/" + RootConfigMapName)
	if err != nil {
		return err
	}
	if !ok {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootConfigMapName, Namespace: ns,
				Labels: map[string]string{rootConfigMapLabel: "true", RootConfigMapOwnerLabel: rootConfigMapOwner}},
			Data: map[string]string{RootConfigMapKey: p.root},
		}
		_, err := api.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer's add event brings it back here
		}
		return err
	}
	cm := obj.(*corev1.ConfigMap)
	owned := cm.Labels[RootConfigMapOwnerLabel] == rootConfigMapOwner
	if cm.Data[RootConfigMapKey] == p.root && cm.Labels[rootConfigMapLabel] == "true" && owned {
		return nil
	}
	if !owned && cm.Data[RootConfigMapKey] != p.root {
		p.log.Warn("left alone: another CA's root (not written by meshperf pilot) is in this namespace's ConfigMap; "+
			"its pods' sidecars will not trust meshperf pilot's CA", "namespace", ns, "configmap", RootConfigMapName)
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Data[RootConfigMapKey] = p.root
	cm.Labels[rootConfigMapLabel] = "true"
	cm.Labels[RootConfigMapOwnerLabel] = rootConfigMapOwner
	_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer version's event brings it back here
	}
	return err
}
