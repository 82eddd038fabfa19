package kubelab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// fieldManager owns every field the lab applies.
const fieldManager = "meshperf-lab"

// kubeLab is one invocation's state on the cluster.
type kubeLab struct {
	cfg     Config
	c       *Cluster
	render  Render
	prov    modeProvenance
	created bool // the namespace exists: finish deletes it
	// mode is the mode the Deployments are rolled out for; pods their
	// pods then ("" until a mode is up).
	mode       scenario.Mode
	modeMTLS   bool
	modeReady  bool
	clientPod  *corev1.Pod
	serverPod  *corev1.Pod
	sidecarErr string // why the mode's sidecars are not as it wants, "" when they are
	// In the ambient modes, the node proxies on the client's and the
	// server's node (one pod when both share a node).
	clientNodeProxy, serverNodeProxy *corev1.Pod
	// In the waypoint modes, the waypoint's pod (the mesh's control plane
	// deploys it from the lab's Gateway).
	waypointPod *corev1.Pod
}

// resources are the lab's kinds by their API group and version.
var resources = map[string]schema.GroupVersionResource{
	"Namespace":          {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
	"Service":            {Version: "v1", Resource: "services"},
	"Deployment":         {Group: "apps", Version: "v1", Resource: "deployments"},
	"PeerAuthentication": {Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"},
	"DestinationRule":    {Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"},
	"Gateway":            {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
}

// apply server-side applies obj, so that a mode's labels and objects
// replace the previous mode's (a label the lab no longer sets goes) with
// one call per object whatever existed before.
func (c *Cluster) apply(ctx context.Context, obj runtime.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	gvr, ok := resources[u.GetKind()]
	if !ok {
		return fmt.Errorf("lab: no resource for kind %s", u.GetKind())
	}
	body, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	var ri = c.Dynamic.Resource(gvr)
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}
	if ns := u.GetNamespace(); ns != "" {
		_, err = ri.Namespace(ns).Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
	} else {
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
	}
	if err != nil {
		return fmt.Errorf("lab: apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// remove deletes kind ns/name if it is there.
func (c *Cluster) remove(ctx context.Context, kind, ns, name string) error {
	err := c.Dynamic.Resource(resources[kind]).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lab: delete %s %s: %w", kind, name, err)
	}
	return nil
}

// create makes the namespace and brings the first mode up; its error is
// the cluster's not running the lab's pods at all.
func (k *kubeLab) create(ctx context.Context, first scenario.RunSpec) error {
	k.created = true
	if err := k.c.apply(ctx, k.render.Objects(first).Namespace); err != nil {
		return err
	}
	return k.ensure(ctx, first)
}

// ensure rolls the Deployments out for spec's mode, as Istio's benchmark
// switches modes (labels and annotations), and waits for their pods; the
// same mode with the same mTLS costs nothing.
func (k *kubeLab) ensure(ctx context.Context, spec scenario.RunSpec) error {
	if k.modeReady && k.mode == spec.Mode && k.modeMTLS == spec.MTLS {
		return nil
	}
	k.modeReady = false
	o := k.render.Objects(spec)
	for _, obj := range o.List() {
		if err := k.c.apply(ctx, obj); err != nil {
			return err
		}
	}
	ns := k.render.Namespace
	if o.DestinationRule == nil {
		if err := k.c.remove(ctx, "DestinationRule", ns, lab.ServerService); err != nil {
			return err
		}
	}
	if o.PeerAuth == nil {
		// no-mesh after a mode with mTLS: the namespace's policy goes too.
		if err := k.c.remove(ctx, "PeerAuthentication", ns, "default"); err != nil {
			return err
		}
	}
	if o.Waypoint == nil {
		if err := k.c.remove(ctx, "Gateway", ns, lab.WaypointGateway); err != nil {
			return err
		}
	}
	var err error
	if k.serverPod, err = k.waitReady(ctx, labPods(serverName, spec.Mode)); err != nil {
		return err
	}
	if k.clientPod, err = k.waitReady(ctx, labPods(clientName, spec.Mode)); err != nil {
		return err
	}
	k.waypointPod = nil
	if spec.Mode.Waypoint() {
		if k.waypointPod, err = k.waitReady(ctx, waypointPods); err != nil {
			return err
		}
	}
	k.sidecarErr = sidecarMismatch(spec.Mode, k.clientPod, k.serverPod)
	k.clientNodeProxy, k.serverNodeProxy = nil, nil
	if spec.Mode.NodeProxies() {
		if k.clientNodeProxy, err = k.nodeProxyOn(ctx, k.clientPod.Spec.NodeName); err != nil {
			return err
		}
		if k.serverNodeProxy, err = k.nodeProxyOn(ctx, k.serverPod.Spec.NodeName); err != nil {
			return err
		}
	}
	k.mode, k.modeMTLS, k.modeReady = spec.Mode, spec.MTLS, true
	return nil
}

// sidecarMismatch says how the pods' containers differ from what mode
// wants ("" when they do not): a pod that asked for a sidecar and came up
// without one was admitted without injection (Istio's injection fails
// open), and its runs measure no sidecar.
func sidecarMismatch(mode scenario.Mode, client, server *corev1.Pod) string {
	wantClient, wantServer := mode.Sidecars()
	var out []string
	for _, p := range []struct {
		pod  *corev1.Pod
		want bool
	}{{client, wantClient}, {server, wantServer}} {
		has := inject.HasSidecar(p.pod)
		switch {
		case p.want && !has:
			out = append(out, fmt.Sprintf("pod %s has no %s container: it was not injected (the injector admitted it without a sidecar)", p.pod.Name, inject.ProxyContainerName))
		case !p.want && has:
			out = append(out, fmt.Sprintf("pod %s has a sidecar (%s) the mode does not want", p.pod.Name, inject.ProxyContainerName))
		}
	}
	return strings.Join(out, "; ")
}

// imagePullReasons are the container states of an image the node cannot
// have.
var imagePullReasons = []string{"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName"}

// deploymentPods are the pods of one Deployment the lab waits for: its
// name, the selector of its pods, and the mode they must be of ("" for
// any: a waypoint's pods are its control plane's, not the lab's).
type deploymentPods struct {
	name, selector string
	mode           scenario.Mode
	// absent says why the Deployment may not exist, for the timeout's
	// message ("" for the lab's own, which it created).
	absent string
}

// labPods are the pods of the lab's Deployment app in mode.
func labPods(app string, mode scenario.Mode) deploymentPods {
	return deploymentPods{name: app, selector: "app=" + app, mode: mode}
}

// waypointPods are the waypoint's, which the mesh's control plane deploys
// from the lab's Gateway, named after it and labelled with its name (both
// istiod and meshperf's pilot do so).
var waypointPods = deploymentPods{name: lab.WaypointGateway, selector: waypointPodLabel + "=" + lab.WaypointGateway,
	absent: "the mesh's control plane has not deployed the waypoint from Gateway " + lab.WaypointGateway +
		" (is it running, and was it started with the Gateway API's Gateway CRD served? its log says)"}

// waitReady waits for one pod of d to be ready, and returns it. It gives
// up at once on what will not mend (an image the node cannot have, a pod
// sandbox the node cannot create, a container that keeps crashing) and
// after ReadyTimeout on anything else, saying which pod and its last
// condition or event.
func (k *kubeLab) waitReady(ctx context.Context, d deploymentPods) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.ReadyTimeout)
	defer cancel()
	last := "" // the last thing seen wrong, for the timeout's message
	for {
		p, why, err := k.podState(ctx, d)
		switch {
		case err != nil:
			return nil, err
		case p != nil && why == "":
			return p, nil
		}
		last = why
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%s not ready after %s: %s", d.name, k.cfg.ReadyTimeout, last)
			}
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// podState is d's pod when it is ready; else why it is not yet, or an
// error when it never will be.
func (k *kubeLab) podState(ctx context.Context, d deploymentPods) (*corev1.Pod, string, error) {
	ns := k.render.Namespace
	pods, err := k.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: d.selector})
	if err != nil {
		return nil, "", fmt.Errorf("lab: list pods: %w", err)
	}
	var current []corev1.Pod
	for _, p := range pods.Items {
		if (d.mode == "" || p.Annotations[ModeAnnotation] == string(d.mode)) && p.DeletionTimestamp == nil {
			current = append(current, p)
		}
	}
	if len(current) == 0 {
		return nil, k.noPodReason(ctx, d), nil
	}
	p := &current[0]
	where := "pod " + ns + "/" + p.Name
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		w := cs.State.Waiting
		switch {
		case w == nil:
		case slices.Contains(imagePullReasons, w.Reason):
			return nil, "", fmt.Errorf("%s: image %s is not on the node (%s): import it with `meshperf image build --out DIR && meshperf image import DIR`, or push it and pass --image-repo",
				where, cs.Image, w.Reason)
		case w.Reason == "CrashLoopBackOff":
			msg := w.Message
			if t := cs.LastTerminationState.Terminated; t != nil {
				msg = fmt.Sprintf("exit %d %s %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
			return nil, "", fmt.Errorf("%s: container %s keeps crashing: %s", where, cs.Name, msg)
		}
	}
	ev := k.lastEvent(ctx, "Pod", p.Name)
	if ev != nil && ev.Reason == "FailedCreatePodSandBox" {
		return nil, "", fmt.Errorf("%s: the node cannot create its sandbox (no CNI network on the node?): %s", where, oneLine(ev.Message))
	}
	if podReady(p) {
		return p, "", nil
	}
	why := where + " phase " + string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && (c.Reason != "" || c.Message != "") {
			why += fmt.Sprintf(", %s: %s %s", c.Type, c.Reason, oneLine(c.Message))
			break
		}
	}
	if ev != nil {
		why += fmt.Sprintf(", last event %s: %s", ev.Reason, oneLine(ev.Message))
	}
	return nil, why, nil
}

// noPodReason says why d has no pod of the current mode yet: its
// ReplicaSet's last event (a webhook that refused the pod, a quota), else
// that nothing has made one.
func (k *kubeLab) noPodReason(ctx context.Context, d deploymentPods) string {
	why := fmt.Sprintf("Deployment %s/%s has no pod", k.render.Namespace, d.name)
	if _, err := k.c.Kube.AppsV1().Deployments(k.render.Namespace).Get(ctx, d.name, metav1.GetOptions{}); d.absent != "" && apierrors.IsNotFound(err) {
		return fmt.Sprintf("no Deployment %s/%s: %s", k.render.Namespace, d.name, d.absent)
	}
	rss, err := k.c.Kube.AppsV1().ReplicaSets(k.render.Namespace).List(ctx, metav1.ListOptions{LabelSelector: d.selector})
	if err == nil {
		var newest *appsv1.ReplicaSet
		for i := range rss.Items {
			if newest == nil || rss.Items[i].CreationTimestamp.After(newest.CreationTimestamp.Time) {
				newest = &rss.Items[i]
			}
		}
		if newest != nil {
			if ev := k.lastEvent(ctx, "ReplicaSet", newest.Name); ev != nil {
				return why + fmt.Sprintf(": ReplicaSet %s: %s: %s", newest.Name, ev.Reason, oneLine(ev.Message))
			}
			return why + " (its ReplicaSet made none)"
		}
	}
	return why + " and no ReplicaSet (is kube-controller-manager running?)"
}

// lastEvent is the latest event about kind/name in the namespace, nil if none.
func (k *kubeLab) lastEvent(ctx context.Context, kind, name string) *corev1.Event {
	evs, err := k.c.Kube.CoreV1().Events(k.render.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil || len(evs.Items) == 0 {
		return nil
	}
	last := &evs.Items[0]
	for i := range evs.Items {
		if eventTime(&evs.Items[i]).After(eventTime(last)) {
			last = &evs.Items[i]
		}
	}
	return last
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// finish deletes the namespace, with everything in it, and waits a while
// for it to go; with --keep it says what was left and how to delete it.
// It runs after an interrupt too, so it does not use the run's context.
func (k *kubeLab) finish() {
	if !k.created {
		return
	}
	ns := k.render.Namespace
	if k.cfg.Keep {
		k.logf("meshperf lab: --keep: namespace %s left on the cluster; delete it with: kubectl delete namespace %s", ns, ns)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.DeleteWait+10*time.Second)
	defer cancel()
	nsClient := k.c.Kube.CoreV1().Namespaces()
	if err := nsClient.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		k.logf("meshperf lab: delete namespace %s: %v (delete it with: kubectl delete namespace %s)", ns, err, ns)
		return
	}
	deadline := time.Now().Add(k.cfg.DeleteWait)
	for time.Now().Before(deadline) {
		if _, err := nsClient.Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	k.logf("meshperf lab: namespace %s is still terminating after %s; the cluster deletes it (kubectl get namespace %s)", ns, k.cfg.DeleteWait, ns)
}

// podReady says whether the pod's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
