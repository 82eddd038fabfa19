package registry

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// kindPod keys a pod's push request: no config kind, since pods are not
// config, but node proxies list every pod as a workload.
const kindPod config.Kind = "Pod"

// podIDPrefix starts the id of a workload that a Kubernetes Pod is.
const podIDPrefix = "Pod/"

// PodWorkload is a running Kubernetes Pod as a workload of the mesh, what
// istiod's ambient index makes of it: node proxies are sent every one, and
// match the pods they capture to them by uid.
type PodWorkload struct {
	Namespace      string
	Name           string
	Address        string // status.podIP
	Labels         map[string]string
	ServiceAccount string
	Node           string // spec.nodeName
	// WorkloadName is the workload it belongs to as Istio reports it (a
	// Deployment's pod: the Deployment), which telemetry names.
	WorkloadName string
	// Ready is the pod's Ready condition: a node proxy sends a service's
	// traffic to ready pods only.
	Ready bool
	// Sidecar says the pod runs its own proxy (istio-proxy): the node proxy
	// does not capture it, whatever its namespace says.
	Sidecar bool
	// NamedPorts are its containers' ports by name, for Services whose
	// targetPort names one.
	NamedPorts map[string]uint32
}

func (p *PodWorkload) equal(q *PodWorkload) bool {
	return p.Namespace == q.Namespace && p.Name == q.Name && p.Address == q.Address &&
		maps.Equal(p.Labels, q.Labels) && p.ServiceAccount == q.ServiceAccount && p.Node == q.Node && p.WorkloadName == q.WorkloadName &&
		p.Ready == q.Ready && p.Sidecar == q.Sidecar && maps.Equal(p.NamedPorts, q.NamedPorts)
}

func podID(namespace, name string) string { return podIDPrefix + namespace + "/" + name }

func fromPod(p *PodWorkload) *workload {
	w := &workload{
		id: podID(p.Namespace, p.Name), namespace: p.Namespace, name: p.Name, address: p.Address,
		labels: p.Labels, serviceAccount: p.ServiceAccount, pod: p,
	}
	if p.Sidecar {
		w.tlsMode = "istio"
	}
	return w
}

// SetPodWorkload records a pod as a workload (replacing what was recorded
// under its namespace and name) and, when that changed anything, asks for
// an endpoint push: node proxies are pushed by content, so only they get
// it unless a selecting service's endpoints moved too.
func (r *Registry) SetPodWorkload(p *PodWorkload) {
	r.mu.Lock()
	id := podID(p.Namespace, p.Name)
	before := r.workloads[id]
	if before != nil && before.pod != nil && before.pod.equal(p) {
		r.mu.Unlock()
		return
	}
	after := fromPod(p)
	r.putWorkloadLocked(after)
	typ, req := r.podChangeLocked(before, after)
	r.mu.Unlock()
	if req != nil {
		r.notify(typ, req)
	}
}

// DeletePodWorkload forgets a pod (deleted, finished, or no longer with
// an address).
func (r *Registry) DeletePodWorkload(namespace, name string) {
	r.mu.Lock()
	id := podID(namespace, name)
	before := r.deleteWorkloadLocked(id)
	if before == nil {
		r.mu.Unlock()
		return
	}
	typ, req := r.podChangeLocked(before, nil)
	r.mu.Unlock()
	if req != nil {
		r.notify(typ, req)
	}
}

func (r *Registry) podChangeLocked(before, after *workload) (InboundType, *model.PushRequest) {
	cur := after
	if cur == nil {
		cur = before
	}
	typ, req := r.endpointChangeLocked(before, after, r.opts.Now())
	if req == nil && r.visibleLocked(cur.namespace) {
		return InboundEDS, model.NewPushRequest(model.ReasonEndpoint, false, r.opts.Now(),
			config.Key{Kind: kindPod, Namespace: cur.namespace, Name: cur.name})
	}
	return typ, req
}

// podServicePorts are the ports a Kubernetes Service reaches on a pod: a
// named targetPort is the pod's container port of that name (a pod
// without it is not reached on that port, as kube-proxy does not reach
// it), a numbered one the number, none the service port.
func podServicePorts(svc *model.Service, spec *corev1.ServiceSpec, p *PodWorkload) []model.PortMapping {
	var out []model.PortMapping
	for _, sp := range svc.Ports {
		target := sp.Number
		if sp.TargetPort != 0 {
			target = sp.TargetPort
		}
		for _, kp := range spec.Ports {
			if uint32(kp.Port) == sp.Number && kp.TargetPort.Type == intstr.String {
				target = p.NamedPorts[kp.TargetPort.StrVal] // 0: the pod has no such port
			}
		}
		if target != 0 {
			out = append(out, model.PortMapping{ServicePort: sp.Number, TargetPort: target})
		}
	}
	return out
}
