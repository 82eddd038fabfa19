package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/meshperf/meshperf/internal/kube/controllers"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Waypoints on Kubernetes, deployed as istiod's gateway deployment
// controller deploys them: for each Gateway of class istio-waypoint, a
// ServiceAccount (the waypoint's identity), a Deployment of meshperf-proxy
// --proxy-type waypoint and a ClusterIP Service for HBONE, all named after
// the Gateway and owned by it, so that deleting the Gateway deletes them;
// then the Gateway's status says where it is (the Service's cluster IP, the
// address node proxies send the bound services' traffic to) and that it is
// Accepted and Programmed.

// waypointManagedLabel marks what the deployer made, Istio's label and
// value for its waypoints.
const (
	waypointManagedLabel = "gateway.istio.io/managed"
	waypointManagedValue = "istio.io-mesh-controller"
	// waypointFieldManager is the deployer's name in server-side apply.
	waypointFieldManager = "meshperf-pilot-waypoints"
	// waypointPortName is the Service's HBONE port, Istio's name for it.
	waypointPortName = "mesh"
)

// waypointArgs make meshperf-proxy a waypoint: no capture, HBONE on 15008.
var waypointArgs = []string{"--proxy-type", "waypoint"}

// WaypointObjects are what deploys gw's waypoint: its ServiceAccount,
// Deployment and Service, in the order to apply them.
func (o Options) WaypointObjects(gw *gatewayv1.Gateway) (*corev1.ServiceAccount, *appsv1.Deployment, *corev1.Service) {
	o = o.withDefaults()
	selector := map[string]string{config.GatewayNameLabel: gw.Name}
	meta := metav1.ObjectMeta{
		Name: gw.Name, Namespace: gw.Namespace,
		Labels: withLabels(selector, map[string]string{waypointManagedLabel: waypointManagedValue}),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID,
			Controller: ptr.To(true),
		}},
	}
	// The pod is the mesh's, never a sidecar's nor a node proxy's: Istio's
	// labels keep the injector and the node agent off it.
	podLabels := withLabels(selector, map[string]string{
		"sidecar.istio.io/inject":         "false",
		"istio.io/dataplane-mode":         "none",
		"service.istio.io/canonical-name": gw.Name,
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace, Labels: podLabels}}
	settings, _ := proxySettingsOf(nil) // Istio's defaults; an empty set cannot fail
	proxy := o.proxyContainer(pod, settings, waypointArgs...)
	proxy.Ports = append(proxy.Ports, corev1.ContainerPort{Name: waypointPortName, ContainerPort: config.WaypointListenerPort, Protocol: corev1.ProtocolTCP})
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta}
	deployment := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: gw.Name,
					Containers:         []corev1.Container{proxy},
					Volumes:            []corev1.Volume{tokenVolume(), rootCertVolume()},
				},
			},
		},
	}
	service := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports: []corev1.ServicePort{{
				Name: waypointPortName, Port: config.WaypointListenerPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(config.WaypointListenerPort),
			}},
		},
	}
	return sa, deployment, service
}

// WaypointDeployer deploys the waypoint of every Gateway of class
// istio-waypoint (see WaypointObjects) and keeps each Gateway's status.
type WaypointDeployer struct {
	core    kubernetes.Interface
	gateway gatewayclient.Interface
	opts    Options
	log     *slog.Logger
}

// NewWaypointDeployer deploys waypoints with opts' images, pilot and CA.
func NewWaypointDeployer(core kubernetes.Interface, gateway gatewayclient.Interface, opts Options, log *slog.Logger) *WaypointDeployer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &WaypointDeployer{core: core, gateway: gateway, opts: opts.withDefaults(), log: log}
}

// Run deploys until ctx ends. A Gateway whose deployment fails is logged
// and retried with backoff, without holding up the others; every Gateway
// is looked at again at each resync, which repairs a deleted Deployment or
// Service.
func (d *WaypointDeployer) Run(ctx context.Context) error {
	factory := gatewayinformers.NewSharedInformerFactory(d.gateway, resync)
	inf := factory.Gateway().V1().Gateways().Informer()
	queue := controllers.NewQueue(func(ctx context.Context, key string) error {
		return d.reconcile(ctx, inf.GetIndexer(), key)
	}, func(key string, err error) {
		d.log.Warn("waypoint not deployed; retrying", "gateway", key, "error", err)
	})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if gw, ok := obj.(*gatewayv1.Gateway); ok && gw.Spec.GatewayClassName == config.WaypointGatewayClass {
			queue.Add(gw.Namespace + "/" + gw.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("watch Gateways: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	queue.Run(ctx)
	return nil
}

// deployTimeout bounds one Gateway's writes, so that an API server that
// stopped answering holds up one Gateway, not the queue for ever.
const deployTimeout = 30 * time.Second

// reconcile deploys the waypoint of the Gateway key names, from what the
// informer holds: nothing for a Gateway gone (its objects are the garbage
// collector's) or being deleted.
func (d *WaypointDeployer) reconcile(ctx context.Context, gateways cache.Indexer, key string) error {
	obj, ok, err := gateways.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	gw, _ := obj.(*gatewayv1.Gateway)
	if gw == nil || gw.DeletionTimestamp != nil || gw.Spec.GatewayClassName != config.WaypointGatewayClass {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, deployTimeout)
	defer cancel()
	sa, deployment, service := d.opts.WaypointObjects(gw)
	if _, err := apply(ctx, d.core.CoreV1().ServiceAccounts(gw.Namespace).Patch, sa); err != nil {
		return err
	}
	if _, err := apply(ctx, d.core.AppsV1().Deployments(gw.Namespace).Patch, deployment); err != nil {
		return err
	}
	applied, err := apply(ctx, d.core.CoreV1().Services(gw.Namespace).Patch, service)
	if err != nil {
		return err
	}
	ip := applied.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return fmt.Errorf("service %s/%s has no cluster IP", service.Namespace, service.Name)
	}
	wrote, err := d.setStatus(ctx, gw, ip)
	if err == nil && wrote {
		d.log.Info("waypoint deployed", "gateway", key, "address", ip)
	}
	return err
}

// kubeObject is a typed object with its metadata.
type kubeObject interface {
	metav1.Object
	runtime.Object
}

// patchFunc is a typed client's Patch.
type patchFunc[T any] func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)

// apply server-side applies obj with patch, forcing: the deployer owns
// these objects' fields, as istiod's controller owns its waypoints'.
func apply[T any](ctx context.Context, patch patchFunc[T], obj kubeObject) (T, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: waypointFieldManager, Force: ptr.To(true)})
	if err != nil {
		return out, fmt.Errorf("apply %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return out, nil
}

// setStatus makes gw's status say its address and that it is Accepted and
// Programmed, writing only when that changes (a write is an update event,
// which would come back here). It reports whether it wrote.
func (d *WaypointDeployer) setStatus(ctx context.Context, gw *gatewayv1.Gateway, ip string) (bool, error) {
	status := gw.Status.DeepCopy()
	status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: ip}}
	for _, c := range []metav1.Condition{
		{Type: string(gatewayv1.GatewayConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gatewayv1.GatewayReasonAccepted),
			Message: "deployed by meshperf pilot as a waypoint"},
		{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue, Reason: string(gatewayv1.GatewayReasonProgrammed),
			Message: fmt.Sprintf("assigned to service %s.%s:%d", gw.Name, gw.Namespace, config.WaypointListenerPort)},
	} {
		c.ObservedGeneration = gw.Generation
		apimeta.SetStatusCondition(&status.Conditions, c)
	}
	if statusEqual(gw.Status, *status) {
		return false, nil
	}
	updated := gw.DeepCopy()
	updated.Status = *status
	_, err := d.gateway.GatewayV1().Gateways(gw.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: waypointFieldManager})
	if apierrors.IsConflict(err) {
		return false, fmt.Errorf("the Gateway changed while its status was written (retried): %w", err)
	}
	return err == nil, err
}

// statusEqual compares what setStatus writes: the addresses and each
// condition's status, reason, message and generation.
func statusEqual(a, b gatewayv1.GatewayStatus) bool {
	if !slices.EqualFunc(a.Addresses, b.Addresses, func(x, y gatewayv1.GatewayStatusAddress) bool {
		return ptr.Deref(x.Type, "") == ptr.Deref(y.Type, "") && x.Value == y.Value
	}) {
		return false
	}
	key := func(cs []metav1.Condition) map[string]metav1.Condition {
		out := map[string]metav1.Condition{}
		for _, c := range cs {
			c.LastTransitionTime = metav1.Time{}
			out[c.Type] = c
		}
		return out
	}
	return maps.Equal(key(a.Conditions), key(b.Conditions))
}
