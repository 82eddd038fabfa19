package registry

import (
	"slices"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// On a cluster a pod is a workload whose services are those selecting it,
// though its endpoints come from EndpointSlices; a named targetPort is the
// pod's container port of that name; a repeated pod changes nothing.
func TestPodsAreWorkloadsWithTheirServices(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{EndpointSlices: true})
	svc := kubeService("shop", "cart", map[string]string{"app": "cart"},
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
		corev1.ServicePort{Name: "grpc", Port: 90, TargetPort: intstr.FromInt32(9090)})
	r.Update(nil, svc)
	rec.take()

	pod := &PodWorkload{Namespace: "shop", Name: "cart-1", Address: "10.0.0.1", Labels: map[string]string{"app": "cart"},
		ServiceAccount: "cart", Node: "node-a", Ready: true, NamedPorts: map[string]uint32{"web": 8080}}
	r.SetPodWorkload(pod)
	types, reqs := rec.take()
	if len(types) != 1 || types[0] != InboundEDS || reqs[0].Full {
		t.Fatalf("a new pod asked for %v %+v, want one endpoint push", types, reqs)
	}
	same := *pod
	same.Labels = map[string]string{"app": "cart"}
	r.SetPodWorkload(&same)
	if types, _ := rec.take(); len(types) != 0 {
		t.Errorf("the same pod again asked for %v, want nothing", types)
	}

	snap := r.Snapshot()
	if len(snap.Workloads) != 1 {
		t.Fatalf("workloads %+v, want the pod", snap.Workloads)
	}
	w := snap.Workloads[0]
	if !w.FromPod || w.FromEntry || w.Node != "node-a" || w.NotReady || w.Sidecar {
		t.Errorf("workload %+v, want a ready pod on node-a without a sidecar", w)
	}
	want := []model.PortMapping{{ServicePort: 80, TargetPort: 8080}, {ServicePort: 90, TargetPort: 9090}}
	if len(w.Services) != 1 || w.Services[0].Service.Hostname != "cart.shop.svc.cluster.local" || !slices.Equal(w.Services[0].Ports, want) {
		t.Errorf("services %+v, want cart with %v", w.Services, want)
	}
	if got := endpointList(snap, snap.Services[0], 80); got != "" {
		t.Errorf("endpoints of cart:80 = %q: a pod is no endpoint of a Service fed by slices", got)
	}

	// Without the named port the Service does not reach it on that port.
	bare := *pod
	bare.NamedPorts = nil
	r.SetPodWorkload(&bare)
	if got := r.Snapshot().Workloads[0].Services[0].Ports; !slices.Equal(got, want[1:]) {
		t.Errorf("ports without a container port named web = %v, want %v", got, want[1:])
	}

	r.DeletePodWorkload("shop", "cart-1")
	if types, _ := rec.take(); len(types) != 2 || types[1] != InboundEDS {
		t.Errorf("the change and the deletion asked for %v, want two endpoint pushes", types)
	}
	if len(r.Snapshot().Workloads) != 0 {
		t.Error("a deleted pod is still a workload")
	}
	r.DeletePodWorkload("shop", "cart-1")
	if types, _ := rec.take(); len(types) != 0 {
		t.Errorf("deleting an unknown pod asked for %v", types)
	}
}

// A sidecar connected from a pod is that pod: a ServiceEntry selecting both
// has it once among its endpoints.
func TestSidecarOfAPodIsOneEndpoint(t *testing.T) {
	r, _, _ := newTestRegistry(Options{EndpointSlices: true})
	r.Update(nil, &config.Resource{Kind: config.KindServiceEntry, Meta: meta("shop", "cart-mesh", nil),
		Spec: &networking.ServiceEntry{
			Hosts:            []string{"cart.mesh.internal"},
			Ports:            []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
			Resolution:       networking.ServiceEntry_STATIC,
			WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"app": "cart"}},
		}})
	labels := map[string]string{"app": "cart"}
	r.SetPodWorkload(&PodWorkload{Namespace: "shop", Name: "cart-1", Address: "10.0.0.1", Labels: labels, Ready: true, Sidecar: true})
	r.ProxyConnected(&model.Proxy{ID: "cart-1.shop", Namespace: "shop", Labels: labels, IPAddresses: []string{"10.0.0.1"}})
	snap := r.Snapshot()
	if got := endpointList(snap, snap.Services[0], 80); got != "10.0.0.1:80+istio" {
		t.Errorf("endpoints of the ServiceEntry = %q, want the pod once", got)
	}
}
