package registry

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// endpointList renders a service port's endpoints as "address:port" with
// their locality and tlsMode when set, in order.
func endpointList(snap *Snapshot, svc *model.Service, port uint32) string {
	var out []string
	for _, e := range snap.Endpoints(svc, port) {
		s := e.Address + ":" + strconv.Itoa(int(e.Port))
		if e.Locality != "" {
			s += "@" + e.Locality
		}
		if e.TLSMode != "" {
			s += "+" + e.TLSMode
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestEndpointSlicesAreAKubernetesServicesEndpoints(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{EndpointSlices: true})
	svc := kubeService("shop", "cart", map[string]string{"app": "cart"},
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
		corev1.ServicePort{Name: "grpc", Port: 90, TargetPort: intstr.FromInt32(9090)})
	r.Update(nil, svc)
	// A sidecar whose labels the selector matches is no endpoint on a
	// cluster: its pod is in the slice already.
	r.ProxyConnected(&model.Proxy{ID: "p1", Namespace: "shop", Labels: map[string]string{"app": "cart"}, IPAddresses: []string{"10.0.0.99"}})
	rec.take()

	ports := map[string]uint32{"http": 8080, "grpc": 9090}
	r.SetEndpointSlice(svc.Key(), "cart-a", []SliceEndpoint{
		{Address: "10.0.0.2", Ready: true, Ports: ports, Locality: "eu/eu-1a", Labels: map[string]string{tlsModeLabel: "istio"}},
		{Address: "10.0.0.1", Ready: true, Ports: ports},
		{Address: "10.0.0.3", Ready: false, Ports: ports}, // not ready: not sent
	})
	types, reqs := rec.take()
	if len(types) != 1 {
		t.Fatalf("a slice change asked for %v, want one EDS push of the Service", types)
	}
	if _, ok := reqs[0].ConfigsUpdated[svc.Key()]; types[0] != InboundEDS || reqs[0].Full || !ok {
		t.Fatalf("a slice change asked for %v %+v, want one EDS push of the Service", types, reqs)
	}
	// The same endpoints again (an informer resync) change nothing.
	r.SetEndpointSlice(svc.Key(), "cart-a", []SliceEndpoint{
		{Address: "10.0.0.2", Ready: true, Ports: ports, Locality: "eu/eu-1a", Labels: map[string]string{tlsModeLabel: "istio"}},
		{Address: "10.0.0.1", Ready: true, Ports: ports},
		{Address: "10.0.0.3", Ready: false, Ports: ports},
	})
	if types, _ := rec.take(); len(types) != 0 {
		t.Errorf("an unchanged slice asked for %v", types)
	}
	// A second slice with an address of the first (mid-replacement)
	// counts it once; an address without the port's name serves no port.
	r.SetEndpointSlice(svc.Key(), "cart-b", []SliceEndpoint{
		{Address: "10.0.0.1", Ready: true, Ports: ports},
		{Address: "10.0.0.4", Ready: true, Ports: map[string]uint32{"grpc": 9090}},
	})
	snap := r.Snapshot()
	cart := snap.ServicesByHostname("cart.shop.svc.cluster.local")[0]
	if got := endpointList(snap, cart, 80); got != "10.0.0.1:8080 10.0.0.2:8080@eu/eu-1a+istio" {
		t.Errorf("port 80 endpoints %q", got)
	}
	if got := endpointList(snap, cart, 90); got != "10.0.0.1:9090 10.0.0.2:9090@eu/eu-1a+istio 10.0.0.4:9090" {
		t.Errorf("port 90 endpoints %q", got)
	}
	r.DeleteEndpointSlice(svc.Key(), "cart-a")
	r.DeleteEndpointSlice(svc.Key(), "cart-b")
	if got := endpointList(r.Snapshot(), cart, 80); got != "" {
		t.Errorf("endpoints after the slices went: %q", got)
	}
	if types, _ := rec.take(); len(types) != 3 {
		t.Errorf("three slice changes asked for %v pushes", types)
	}
}

func TestPublishNotReadyAddressesSendsUnreadyEndpoints(t *testing.T) {
	r, _, _ := newTestRegistry(Options{EndpointSlices: true})
	svc := kubeService("shop", "db", nil, corev1.ServicePort{Name: "tcp", Port: 5432})
	svc.Spec.(*corev1.ServiceSpec).PublishNotReadyAddresses = true
	r.Update(nil, svc)
	r.SetEndpointSlice(svc.Key(), "db-a", []SliceEndpoint{{Address: "10.0.0.5", Ports: map[string]uint32{"tcp": 5432}}})
	snap := r.Snapshot()
	if got := endpointList(snap, snap.Services[0], 5432); got != "10.0.0.5:5432" {
		t.Errorf("endpoints %q, want the unready address of a Service that publishes them", got)
	}
}

func TestSliceBeforeItsServiceAsksForNoPush(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{EndpointSlices: true})
	svc := kubeService("shop", "cart", nil, corev1.ServicePort{Name: "http", Port: 80})
	r.SetEndpointSlice(svc.Key(), "cart-a", []SliceEndpoint{{Address: "10.0.0.1", Ready: true, Ports: map[string]uint32{"http": 80}}})
	if types, _ := rec.take(); len(types) != 0 {
		t.Errorf("a slice of an unknown Service asked for %v", types)
	}
	r.Update(nil, svc) // its own full push carries the endpoints
	snap := r.Snapshot()
	if got := endpointList(snap, snap.Services[0], 80); got != "10.0.0.1:80" {
		t.Errorf("endpoints %q", got)
	}
}
