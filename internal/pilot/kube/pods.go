package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

// indexNodeIdentity indexes pods by node and service account
// (NODE/NS/SA), for the CA's question: does a pod of this identity run on
// the node proxy's node?
const indexNodeIdentity = "nodeIdentity"

func nodeIdentityKey(node, namespace, serviceAccount string) string {
	return node + "/" + namespace + "/" + serviceAccount
}

var podIndexers = cache.Indexers{
	indexNodeIdentity: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || terminal(p) {
			return nil, nil
		}
		return []string{nodeIdentityKey(p.Spec.NodeName, p.Namespace, inject.ServiceAccount(p))}, nil
	},
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podWorkload is the pod as a workload of the mesh, nil when it is none:
// istiod's ambient index takes every pod with an address of its own (not
// the host's) that has not finished.
func podWorkload(p *corev1.Pod) *registry.PodWorkload {
	if p.Status.PodIP == "" || p.Spec.HostNetwork || terminal(p) {
		return nil
	}
	w := &registry.PodWorkload{
		Namespace: p.Namespace, Name: p.Name, Address: p.Status.PodIP, Labels: p.Labels,
		ServiceAccount: inject.ServiceAccount(p), Node: p.Spec.NodeName, WorkloadName: inject.WorkloadName(p),
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			w.Ready = c.Status == corev1.ConditionTrue
		}
	}
	w.Sidecar = inject.HasSidecar(p)
	for _, list := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range list {
			for _, port := range c.Ports {
				if port.Name == "" {
					continue
				}
				if w.NamedPorts == nil {
					w.NamedPorts = map[string]uint32{}
				}
				w.NamedPorts[port.Name] = uint32(port.ContainerPort)
			}
		}
	}
	return w
}

// podWorkloadHandler sends the sink each pod as a workload. The registry
// drops an update that changes nothing it keeps, so a pod's status churn
// (probes) costs a comparison, not a push.
func (w *watch) podWorkloadHandler() cache.ResourceEventHandler {
	changed := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if pw := podWorkload(p); pw != nil && !deleted {
			w.sink.SetPodWorkload(pw)
			return
		}
		w.sink.DeletePodWorkload(p.Namespace, p.Name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(obj, false) },
		UpdateFunc: func(_, obj any) { changed(obj, false) },
		DeleteFunc: func(obj any) { changed(obj, true) },
	}
}

// PodNode implements ca.NodeAuthorizer: the node a pod is scheduled to,
// from the pod informer (false before Start, or for an unknown pod).
func (s *Source) PodNode(namespace, name string) (string, bool) {
	pods := s.podInformer()
	if pods == nil {
		return "", false
	}
	obj, ok, err := pods.GetIndexer().GetByKey(podKey(namespace, name))
	if err != nil || !ok {
		return "", false
	}
	p, _ := obj.(*corev1.Pod)
	if p == nil || p.Spec.NodeName == "" {
		return "", false
	}
	return p.Spec.NodeName, true
}

// ServiceAccountOnNode implements ca.NodeAuthorizer: whether a pod of the
// service account, not finished, is on the node.
func (s *Source) ServiceAccountOnNode(node, namespace, serviceAccount string) bool {
	pods := s.podInformer()
	if pods == nil {
		return false
	}
	objs, err := pods.GetIndexer().ByIndex(indexNodeIdentity, nodeIdentityKey(node, namespace, serviceAccount))
	return err == nil && len(objs) > 0
}

func (s *Source) podInformer() cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods
}
