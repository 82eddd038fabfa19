package registry

import (
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// tlsModeLabel is Istio's label saying a workload has a sidecar (value "istio")
// and so accepts mTLS.
const tlsModeLabel = "security.istio.io/tlsMode"

// proxyIDPrefix starts the id of a workload registered by a connected proxy.
const proxyIDPrefix = "proxy/"

// workload is something that can serve a service: a WorkloadEntry, a
// Kubernetes Pod, or a proxy that connected with its labels and address.
type workload struct {
	id             string // "WorkloadEntry/ns/name", "Pod/ns/name" or "proxy/<node id>"
	namespace      string
	name           string
	address        string
	labels         map[string]string
	serviceAccount string
	ports          map[string]uint32 // WorkloadEntry's port overrides, by service port name
	tlsMode        string
	pod            *PodWorkload // what the pod said; nil for the others
}

func fromWorkloadEntry(r *config.Resource, we *networking.WorkloadEntry) *workload {
	return &workload{
		id:             r.Key().String(),
		namespace:      r.Meta.Namespace,
		name:           r.Meta.Name,
		address:        we.GetAddress(),
		labels:         we.GetLabels(),
		serviceAccount: we.GetServiceAccount(),
		ports:          we.GetPorts(),
		tlsMode:        we.GetLabels()[tlsModeLabel],
	}
}

func fromProxy(p *model.Proxy) *workload {
	w := &workload{
		id:             proxyIDPrefix + p.ID,
		namespace:      p.Namespace,
		name:           p.WorkloadName,
		labels:         p.Labels,
		serviceAccount: p.ServiceAccount,
		tlsMode:        "istio", // it has a sidecar: this proxy
	}
	if w.name == "" {
		w.name = p.PodName
	}
	if len(p.IPAddresses) > 0 {
		w.address = p.IPAddresses[0]
	}
	return w
}

// view is the workload as pushes see it, without its services (the snapshot
// adds those).
func (w *workload) view() *model.Workload {
	v := &model.Workload{
		Name: w.name, Namespace: w.namespace, Address: w.address, Labels: w.labels,
		ServiceAccount: w.serviceAccount,
		FromEntry:      !strings.HasPrefix(w.id, proxyIDPrefix) && w.pod == nil,
	}
	if p := w.pod; p != nil {
		v.FromPod, v.Node, v.WorkloadName, v.NotReady, v.Sidecar = true, p.Node, p.WorkloadName, !p.Ready, p.Sidecar
	}
	return v
}

// selectedBy is the workload's port mapping for a service that selects it.
// A Kubernetes Service on a cluster takes its endpoints from
// EndpointSlices, but node proxies still need each pod's services
// (the WDS workload's services), from the selector as istiod finds them.
func (w *workload) selectedBy(svc *model.Service, res *config.Resource) model.WorkloadService {
	if spec, ok := res.Spec.(*corev1.ServiceSpec); ok && w.pod != nil {
		return model.WorkloadService{Service: svc, Ports: podServicePorts(svc, spec, w.pod)}
	}
	return workloadService(svc, endpointsFor(svc, w))
}

// workloadService is a selecting service with the ports its endpoints on the
// workload (endpointsFor's) reach.
func workloadService(svc *model.Service, eps []*model.Endpoint) model.WorkloadService {
	ws := model.WorkloadService{Service: svc}
	for _, e := range eps {
		ws.Ports = append(ws.Ports, model.PortMapping{ServicePort: e.ServicePort, TargetPort: e.Port})
	}
	return ws
}

// selects says whether a service's selector picks the workload: same
// namespace, and every selector label present with the same value. An empty or
// missing selector picks nothing (as for a Kubernetes Service without one).
func selects(s *model.Service, w *workload) bool {
	if len(s.Selector) == 0 || s.Namespace != w.namespace || w.address == "" {
		return false
	}
	for k, v := range s.Selector {
		if got, ok := w.labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// endpointsFor returns the workload's endpoints for every port of s.
func endpointsFor(s *model.Service, w *workload) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(s.Ports))
	for _, p := range s.Ports {
		port := p.Number
		if p.TargetPort != 0 {
			port = p.TargetPort
		}
		if override, ok := w.ports[p.Name]; ok && override != 0 {
			port = override
		}
		out = append(out, &model.Endpoint{
			Address: w.address, Port: port, ServicePort: p.Number, Labels: w.labels,
			ServiceAccount: w.serviceAccount, Namespace: w.namespace, WorkloadName: w.name,
			TLSMode: w.tlsMode,
		})
	}
	return out
}

// inlineEndpoints are a ServiceEntry's own endpoints (spec.endpoints).
func inlineEndpoints(s *model.Service, r *config.Resource) []*model.Endpoint {
	se, ok := r.Spec.(*networking.ServiceEntry)
	if !ok {
		return nil
	}
	var out []*model.Endpoint
	for _, we := range se.GetEndpoints() {
		w := &workload{
			id: r.Key().String(), namespace: r.Meta.Namespace, name: r.Meta.Name,
			address: we.GetAddress(), labels: we.GetLabels(), serviceAccount: we.GetServiceAccount(),
			ports: we.GetPorts(), tlsMode: we.GetLabels()[tlsModeLabel],
		}
		out = append(out, endpointsFor(s, w)...)
	}
	return out
}
