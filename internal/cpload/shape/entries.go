package shape

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Forms a mesh's services and pods can take.
const (
	// FormServices: Kubernetes Services; the endpoints are the pods, which
	// meshperf pilot learns from the connected proxies (or, on a cluster,
	// from the API server).
	FormServices = "services"
	// FormServiceEntries: a ServiceEntry per Service, with the same host,
	// ports and selector, and a WorkloadEntry per pod: the kinds istiod
	// reads in its file mode, which has no Kubernetes registry.
	FormServiceEntries = "serviceentries"
)

// tlsModeLabel is Istio's label saying a workload has a sidecar.
const tlsModeLabel = "security.istio.io/tlsMode"

// InForm returns m with its services and pods in form: m itself for
// FormServices, a copy for FormServiceEntries.
func InForm(m *Mesh, form, domainSuffix string) (*Mesh, error) {
	switch form {
	case "", FormServices:
		return m, nil
	case FormServiceEntries:
		return asServiceEntries(m, domainSuffix)
	}
	return nil, fmt.Errorf("form %q: want %s or %s", form, FormServices, FormServiceEntries)
}

// asEntries returns rs with each Kubernetes Service replaced by its
// ServiceEntry.
func asEntries(rs []*config.Resource, domainSuffix string) []*config.Resource {
	out := make([]*config.Resource, 0, len(rs))
	for _, r := range rs {
		spec, ok := r.Spec.(*corev1.ServiceSpec)
		if !ok || r.Kind != config.KindService {
			out = append(out, r)
			continue
		}
		se := &networking.ServiceEntry{
			Hosts:      []string{r.Meta.Name + "." + r.Meta.Namespace + ".svc." + domainSuffix},
			Location:   networking.ServiceEntry_MESH_INTERNAL,
			Resolution: networking.ServiceEntry_STATIC,
		}
		if len(spec.Selector) > 0 {
			se.WorkloadSelector = &networking.WorkloadSelector{Labels: spec.Selector}
		}
		for _, p := range spec.Ports {
			port := &networking.ServicePort{Number: uint32(p.Port), Name: p.Name, Protocol: string(model.ProtocolFromName(p.Name))}
			if tp := p.TargetPort.IntValue(); tp > 0 {
				port.TargetPort = uint32(tp)
			}
			se.Ports = append(se.Ports, port)
		}
		out = append(out, &config.Resource{Kind: config.KindServiceEntry, APIVersion: networkingAPI,
			Meta: metav1.ObjectMeta{Name: r.Meta.Name, Namespace: r.Meta.Namespace, Labels: r.Meta.Labels}, Spec: se})
	}
	return out
}

// asServiceEntries replaces each Service of m with the ServiceEntry istiod
// would make of it (host NAME.NS.svc.SUFFIX, STATIC resolution, the same
// ports with their protocol from the port name, the selector as its
// workloadSelector) and adds a WorkloadEntry for each pod (its address,
// labels and service account), so that the same mesh can be fed to a
// control plane that reads only Istio's kinds.
func asServiceEntries(m *Mesh, domainSuffix string) (*Mesh, error) {
	out := &Mesh{Resources: asEntries(m.Resources, domainSuffix), Extra: asEntries(m.Extra, domainSuffix), Proxies: m.Proxies}
	for _, p := range m.Proxies {
		// Each pod has a sidecar, which the injector's tlsMode label says
		// on a pod and this label says on its entry: its endpoints take
		// mutual TLS.
		labels := merge(p.Labels, map[string]string{tlsModeLabel: "istio"})
		out.Resources = append(out.Resources, &config.Resource{Kind: config.KindWorkloadEntry, APIVersion: networkingAPI,
			Meta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: labels},
			Spec: &networking.WorkloadEntry{Address: p.IP, Labels: labels, ServiceAccount: p.ServiceAccount}})
	}
	for _, r := range out.All() {
		if err := config.Validate(r); err != nil {
			return nil, fmt.Errorf("the mesh as ServiceEntries: %s is invalid: %w", r.Key(), err)
		}
	}
	return out, nil
}
