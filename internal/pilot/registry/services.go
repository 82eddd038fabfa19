package registry

import (
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// servicesOf turns a Service or ServiceEntry into the registry's services: one
// for a Service, one per host for a ServiceEntry.
func servicesOf(r *config.Resource, domainSuffix string) []*model.Service {
	switch spec := r.Spec.(type) {
	case *corev1.ServiceSpec:
		return []*model.Service{fromKubeService(r, spec, domainSuffix)}
	case *networking.ServiceEntry:
		return fromServiceEntry(r, spec)
	}
	return nil
}

func fromKubeService(r *config.Resource, spec *corev1.ServiceSpec, domainSuffix string) *model.Service {
	s := &model.Service{
		Key:       r.Key(),
		Hostname:  r.Meta.Name + "." + r.Meta.Namespace + ".svc." + domainSuffix,
		Namespace: r.Meta.Namespace,
		Selector:  spec.Selector,
		Labels:    r.Meta.Labels,
	}
	if ip := spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		s.Addresses = []string{ip}
	}
	if spec.ClusterIP == corev1.ClusterIPNone {
		s.Resolution = model.ResolveNone // headless: straight to the pods
	}
	for _, p := range spec.Ports {
		port := model.ServicePort{Name: p.Name, Number: uint32(p.Port)}
		// A named targetPort refers to a container port the registry does not
		// see; the service port is the best guess, as for a missing one.
		if tp := p.TargetPort.IntValue(); tp > 0 {
			port.TargetPort = uint32(tp)
		}
		port.Protocol = kubeProtocol(p)
		s.Ports = append(s.Ports, port)
	}
	return s
}

// kubeProtocol is Istio's protocol selection for a Service port: appProtocol,
// else the port name's prefix (http-, grpc-, ...), else TCP (Istio sniffs;
// meshperf treats undeclared ports as TCP, as Istio does with sniffing off).
func kubeProtocol(p corev1.ServicePort) model.Protocol {
	if p.AppProtocol != nil && *p.AppProtocol != "" {
		return model.ProtocolFromName(*p.AppProtocol)
	}
	if p.Protocol == corev1.ProtocolUDP || p.Protocol == corev1.ProtocolSCTP {
		return model.Protocol(p.Protocol)
	}
	return model.ProtocolFromName(p.Name)
}

func fromServiceEntry(r *config.Resource, spec *networking.ServiceEntry) []*model.Service {
	var ports []model.ServicePort
	for _, p := range spec.GetPorts() {
		ports = append(ports, model.ServicePort{
			Name: p.GetName(), Number: p.GetNumber(), TargetPort: p.GetTargetPort(),
			Protocol: model.Protocol(strings.ToUpper(p.GetProtocol())),
		})
	}
	resolution := model.ResolveStatic
	switch spec.GetResolution() {
	case networking.ServiceEntry_NONE:
		resolution = model.ResolveNone
	case networking.ServiceEntry_DNS:
		resolution = model.ResolveDNS
	case networking.ServiceEntry_DNS_ROUND_ROBIN, networking.ServiceEntry_DYNAMIC_DNS:
		resolution = model.ResolveDNSRoundRobin
	}
	var selector map[string]string
	if ws := spec.GetWorkloadSelector(); ws != nil {
		selector = ws.GetLabels()
	}
	out := make([]*model.Service, 0, len(spec.GetHosts()))
	for _, host := range spec.GetHosts() {
		out = append(out, &model.Service{
			Key:          r.Key(),
			Hostname:     host,
			Namespace:    r.Meta.Namespace,
			Ports:        ports,
			Resolution:   resolution,
			MeshExternal: spec.GetLocation() == networking.ServiceEntry_MESH_EXTERNAL,
			Selector:     selector,
			Addresses:    spec.GetAddresses(),

			SubjectAltNames: spec.GetSubjectAltNames(),
			Labels:          r.Meta.Labels,
		})
	}
	return out
}
