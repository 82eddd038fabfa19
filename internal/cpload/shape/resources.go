package shape

import (
	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Port is a Service port.
type Port struct {
	Name       string // e.g. "http"; Istio picks the protocol from the prefix
	Number     int32
	TargetPort int32 // 0: the same as Number
}

const (
	coreAPI       = "v1"
	networkingAPI = "networking.istio.io/v1"
)

func namespace(name string, labels map[string]string) *config.Resource {
	return &config.Resource{Kind: config.KindNamespace, APIVersion: coreAPI,
		Meta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: &corev1.NamespaceSpec{}}
}

func service(ns, name string, labels, selector map[string]string, ports []Port) *config.Resource {
	spec := &corev1.ServiceSpec{Selector: selector}
	for _, p := range ports {
		sp := corev1.ServicePort{Name: p.Name, Port: p.Number, Protocol: corev1.ProtocolTCP}
		if p.TargetPort != 0 {
			sp.TargetPort = intstr.FromInt32(p.TargetPort)
		}
		spec.Ports = append(spec.Ports, sp)
	}
	return &config.Resource{Kind: config.KindService, APIVersion: coreAPI,
		Meta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: spec}
}

// httpGateway is a Gateway with one plain HTTP server on port 80.
func httpGateway(ns, name, host string, selector map[string]string) *config.Resource {
	return &config.Resource{Kind: config.KindGateway, APIVersion: networkingAPI,
		Meta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: &networking.Gateway{Selector: selector, Servers: []*networking.Server{{
			Port:  &networking.Port{Number: 80, Name: "http", Protocol: "HTTP"},
			Hosts: []string{host},
		}}}}
}

// gatewayRoute is a VirtualService sending host, as seen by gateway, to
// destination:port.
func gatewayRoute(ns, name, host, gateway, destination string, port uint32) *config.Resource {
	return &config.Resource{Kind: config.KindVirtualService, APIVersion: networkingAPI,
		Meta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: &networking.VirtualService{Hosts: []string{host}, Gateways: []string{gateway},
			Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{
				Destination: &networking.Destination{Host: destination, Port: &networking.PortSelector{Number: port}},
			}}}}}}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
