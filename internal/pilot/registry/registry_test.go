package registry

import (
	"slices"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// recorder collects what the registry asks the pipeline to push.
type recorder struct {
	mu    sync.Mutex
	types []InboundType
	reqs  []*model.PushRequest
}

func (r *recorder) notify(t InboundType, req *model.PushRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types, r.reqs = append(r.types, t), append(r.reqs, req)
}

func (r *recorder) take() ([]InboundType, []*model.PushRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, q := r.types, r.reqs
	r.types, r.reqs = nil, nil
	return t, q
}

// manualTimers runs scheduled removals only when the test says so.
type manualTimers struct{ pending []func() }

func (m *manualTimers) afterFunc(_ time.Duration, f func()) func() bool {
	i := len(m.pending)
	m.pending = append(m.pending, f)
	return func() bool { m.pending[i] = nil; return true }
}

func (m *manualTimers) fire() {
	fs := m.pending
	m.pending = nil
	for _, f := range fs {
		if f != nil {
			f()
		}
	}
}

func meta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
}

func kubeService(ns, name string, selector map[string]string, ports ...corev1.ServicePort) *config.Resource {
	return &config.Resource{Kind: config.KindService, APIVersion: "v1", Meta: meta(ns, name, nil),
		Spec: &corev1.ServiceSpec{Selector: selector, Ports: ports, ClusterIP: "10.96.0.10"}}
}

func workloadEntry(ns, name, addr string, labels map[string]string) *config.Resource {
	return &config.Resource{Kind: config.KindWorkloadEntry, Meta: meta(ns, name, nil),
		Spec: &networking.WorkloadEntry{Address: addr, Labels: labels, ServiceAccount: "sa-" + name}}
}

func newTestRegistry(opts Options) (*Registry, *recorder, *manualTimers) {
	rec, timers := &recorder{}, &manualTimers{}
	opts.AfterFunc = timers.afterFunc
	return New(opts, rec.notify), rec, timers
}

func TestServiceChangesAreFullPushes(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{})
	svc := kubeService("shop", "cart", map[string]string{"app": "cart"},
		corev1.ServicePort{Name: "http-web", Port: 80, TargetPort: intstr.FromInt(8080)})
	r.Update(nil, svc)
	r.Update(svc, nil)
	types, reqs := rec.take()
	if len(reqs) != 2 || types[0] != InboundSvc || types[1] != InboundSvcDelete {
		t.Fatalf("types %v", types)
	}
	if !reqs[0].Full || reqs[0].Reason[model.ReasonService] != 1 {
		t.Errorf("request %+v", reqs[0])
	}
	if _, ok := reqs[0].ConfigsUpdated[svc.Key()]; !ok {
		t.Errorf("the service's key is not among the changed configs: %v", reqs[0].ConfigsUpdated)
	}
}

func TestEndpointsAreTheWorkloadsAServiceSelects(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{})
	r.Update(nil, kubeService("shop", "cart", map[string]string{"app": "cart"},
		corev1.ServicePort{Name: "http-web", Port: 80, TargetPort: intstr.FromInt(8080)},
		corev1.ServicePort{Name: "grpc", Port: 90}))
	rec.take()
	r.Update(nil, workloadEntry("shop", "vm1", "10.0.0.2", map[string]string{"app": "cart"}))
	r.Update(nil, workloadEntry("shop", "other", "10.0.0.3", map[string]string{"app": "db"}))
	r.Update(nil, workloadEntry("elsewhere", "vm2", "10.0.0.4", map[string]string{"app": "cart"}))
	r.ProxyConnected(&model.Proxy{ID: "sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", Namespace: "shop",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart", "version": "v1"}, ServiceAccount: "cart"})

	types, reqs := rec.take()
	// Every WorkloadEntry is an endpoint push (node proxies list them all),
	// but only the two cart workloads in the service's namespace move its
	// endpoints; the others name only themselves.
	if len(reqs) != 4 || types[0] != InboundEDS || reqs[0].Full || reqs[0].Reason[model.ReasonEndpoint] != 1 {
		t.Fatalf("types %v, requests %d", types, len(reqs))
	}
	cartKey := config.Key{Kind: config.KindService, Namespace: "shop", Name: "cart"}
	for i, want := range []config.Key{cartKey, {Kind: config.KindWorkloadEntry, Namespace: "shop", Name: "other"},
		{Kind: config.KindWorkloadEntry, Namespace: "elsewhere", Name: "vm2"}, cartKey} {
		if _, ok := reqs[i].ConfigsUpdated[want]; !ok || len(reqs[i].ConfigsUpdated) != 1 {
			t.Errorf("request %d is about %v, want %v", i, reqs[i].ConfigsUpdated, want)
		}
	}
	snap := r.Snapshot()
	if len(snap.Workloads) != 4 {
		t.Fatalf("workloads %+v", snap.Workloads)
	}
	vm1 := snap.Workloads[3]
	if vm1.Name != "vm1" || !vm1.FromEntry || len(vm1.Services) != 1 ||
		!slices.Equal(vm1.Services[0].Ports, []model.PortMapping{{ServicePort: 80, TargetPort: 8080}, {ServicePort: 90, TargetPort: 90}}) {
		t.Errorf("workload vm1 %+v", vm1)
	}
	if sidecar := snap.Workloads[1]; sidecar.Address != "10.0.0.1" || sidecar.FromEntry {
		t.Errorf("the registered sidecar %+v", sidecar)
	}
	if len(snap.Services) != 1 || snap.Services[0].Hostname != "cart.shop.svc.cluster.local" {
		t.Fatalf("services %+v", snap.Services)
	}
	svc := snap.Services[0]
	if svc.Ports[0].Protocol != "HTTP" || svc.Ports[1].Protocol != "GRPC" {
		t.Errorf("protocols %+v", svc.Ports)
	}
	eps := snap.Endpoints(svc, 80)
	if len(eps) != 2 || eps[0].Address != "10.0.0.1" || eps[0].Port != 8080 || eps[0].TLSMode != "istio" ||
		eps[1].Address != "10.0.0.2" || eps[1].ServiceAccount != "sa-vm1" || eps[1].TLSMode != "" {
		t.Errorf("endpoints of port 80: %+v %+v", eps[0], eps[1])
	}
	if eps := snap.Endpoints(svc, 90); len(eps) != 2 || eps[0].Port != 90 {
		t.Errorf("endpoints of port 90 (no targetPort): %v", eps)
	}
}

func TestDisconnectedProxyStaysForTheGracePeriod(t *testing.T) {
	r, rec, timers := newTestRegistry(Options{})
	r.Update(nil, kubeService("shop", "cart", map[string]string{"app": "cart"}, corev1.ServicePort{Name: "http", Port: 80}))
	p := &model.Proxy{ID: "sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", Namespace: "shop",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart"}}
	r.ProxyConnected(p)
	rec.take()

	// Disconnect and reconnect within the grace period: no endpoint moves.
	r.ProxyDisconnected(p)
	r.ProxyConnected(p)
	timers.fire()
	if _, reqs := rec.take(); len(reqs) != 0 {
		t.Errorf("a reconnect within the grace period pushed %d times", len(reqs))
	}
	if n := len(r.Snapshot().Endpoints(r.Snapshot().Services[0], 80)); n != 1 {
		t.Errorf("%d endpoints after reconnect", n)
	}

	// Gone for good: removed when the grace period ends, with an EDS push.
	r.ProxyDisconnected(p)
	if n := len(r.Snapshot().Endpoints(r.Snapshot().Services[0], 80)); n != 1 {
		t.Errorf("removed before the grace period ended (%d endpoints)", n)
	}
	timers.fire()
	types, reqs := rec.take()
	if len(reqs) != 1 || types[0] != InboundEDS {
		t.Fatalf("removal pushed %v", types)
	}
	if n := len(r.Snapshot().Endpoints(r.Snapshot().Services[0], 80)); n != 0 {
		t.Errorf("%d endpoints after removal", n)
	}
}

func TestServiceEntryHostsAndInlineEndpoints(t *testing.T) {
	r, _, _ := newTestRegistry(Options{})
	r.Update(nil, &config.Resource{Kind: config.KindServiceEntry, Meta: meta("ext", "apis", nil),
		Spec: &networking.ServiceEntry{
			Hosts:      []string{"api.example.com", "*.cdn.example.com"},
			Ports:      []*networking.ServicePort{{Number: 443, Name: "https", Protocol: "TLS"}},
			Resolution: networking.ServiceEntry_STATIC,
			Endpoints:  []*networking.WorkloadEntry{{Address: "192.0.2.1"}, {Address: "192.0.2.2", Ports: map[string]uint32{"https": 8443}}},
		}})
	snap := r.Snapshot()
	if len(snap.Services) != 2 || snap.Services[0].Hostname != "*.cdn.example.com" || !snap.Services[1].MeshExternal {
		t.Fatalf("services %+v", snap.Services)
	}
	eps := snap.Endpoints(snap.ServicesByHostname("api.example.com")[0], 443)
	if len(eps) != 2 || eps[0].Port != 443 || eps[1].Port != 8443 {
		t.Errorf("endpoints %+v", eps)
	}
	if r.ServiceCount() != 2 {
		t.Errorf("ServiceCount %d", r.ServiceCount())
	}
}

func TestDiscoverySelectorsHideNamespacesAndRelabellingPushes(t *testing.T) {
	selected := func(_ string, labels map[string]string) bool { return labels["mesh"] == "on" }
	r, rec, _ := newTestRegistry(Options{NamespaceSelected: selected})
	ns := &config.Resource{Kind: config.KindNamespace, Meta: meta("", "shop", map[string]string{"mesh": "off"})}
	r.Update(nil, ns)
	r.Update(nil, kubeService("shop", "cart", nil, corev1.ServicePort{Name: "http", Port: 80}))
	if _, reqs := rec.take(); len(reqs) != 0 {
		t.Errorf("changes in an unselected namespace pushed %d times", len(reqs))
	}
	if n := len(r.Snapshot().Services); n != 0 {
		t.Errorf("%d services visible from an unselected namespace", n)
	}
	on := &config.Resource{Kind: config.KindNamespace, Meta: meta("", "shop", map[string]string{"mesh": "on"})}
	r.Update(ns, on)
	types, reqs := rec.take()
	if len(reqs) != 1 || types[0] != InboundConfig || !reqs[0].Full || reqs[0].Reason[model.ReasonNamespace] != 1 {
		t.Fatalf("relabel pushed %v %v", types, reqs)
	}
	if n := len(r.Snapshot().Services); n != 1 {
		t.Errorf("%d services after the namespace was selected", n)
	}
	r.Update(on, on) // same labels: nothing to push
	if _, reqs := rec.take(); len(reqs) != 0 {
		t.Errorf("an unchanged namespace pushed")
	}
}

// A connected sidecar at the address of a WorkloadEntry (or pod) of its
// namespace is that workload's proxy: the service's endpoint once, as the
// entry declares it.
func TestSidecarOfADeclaredWorkloadIsOneEndpoint(t *testing.T) {
	r, _, _ := newTestRegistry(Options{})
	r.Update(nil, kubeService("shop", "cart", map[string]string{"app": "cart"},
		corev1.ServicePort{Name: "http-web", Port: 80, TargetPort: intstr.FromInt(8080)}))
	we := workloadEntry("shop", "cart-1", "10.0.0.1", map[string]string{"app": "cart", "security.istio.io/tlsMode": "istio"})
	r.Update(nil, we)
	r.ProxyConnected(&model.Proxy{ID: "sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", Namespace: "shop",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart"}, ServiceAccount: "cart"})
	// The same address in another namespace is another workload.
	r.ProxyConnected(&model.Proxy{ID: "sidecar~10.0.0.1~cart-1.other~other.svc.cluster.local", Namespace: "other",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart"}, ServiceAccount: "cart"})
	snap := r.Snapshot()
	eps := snap.Endpoints(snap.Services[0], 80)
	if len(eps) != 1 || eps[0].Address != "10.0.0.1" || eps[0].ServiceAccount != "sa-cart-1" || eps[0].TLSMode != "istio" {
		t.Errorf("endpoints %+v, want the entry's once", eps)
	}
	if len(snap.Workloads) != 2 {
		t.Errorf("workloads %+v, want the entry and the other namespace's sidecar", snap.Workloads)
	}
	r.Update(we, nil)
	if eps := r.Snapshot().Endpoints(snap.Services[0], 80); len(eps) != 1 || eps[0].ServiceAccount != "cart" {
		t.Errorf("with the entry deleted, endpoints %+v, want the sidecar's", eps)
	}
}

// TestReplaceConfigDropsWhatTheListingLacks: after a watch fell behind, the
// store's listing replaces the config-fed objects, deletions included, and
// leaves the workloads proxies registered.
func TestReplaceConfigDropsWhatTheListingLacks(t *testing.T) {
	r, rec, _ := newTestRegistry(Options{})
	cart := kubeService("shop", "cart", map[string]string{"app": "cart"}, corev1.ServicePort{Name: "http", Port: 80})
	ledger := kubeService("shop", "ledger", map[string]string{"app": "cart"}, corev1.ServicePort{Name: "http", Port: 81})
	ns := &config.Resource{Kind: config.KindNamespace, Meta: meta("", "shop", map[string]string{"team": "a"})}
	for _, res := range []*config.Resource{ns, cart, ledger, workloadEntry("shop", "vm1", "10.0.0.2", map[string]string{"app": "cart"}),
		&config.Resource{Kind: config.KindNamespace, Meta: meta("", "gone", nil)}} {
		r.Update(nil, res)
	}
	r.ProxyConnected(&model.Proxy{ID: "sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", Namespace: "shop",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart"}, ServiceAccount: "cart"})
	rec.take()

	// The listing: ledger and vm1 deleted, the namespace gone deleted, a new
	// WorkloadEntry vm2, and a DestinationRule the registry does not hold.
	r.ReplaceConfig([]*config.Resource{ns, cart, workloadEntry("shop", "vm2", "10.0.0.3", map[string]string{"app": "cart"}),
		{Kind: config.KindDestinationRule, Meta: meta("shop", "cart", nil)}})

	if types, _ := rec.take(); len(types) != 0 {
		t.Errorf("ReplaceConfig notified %v; its caller pushes everything", types)
	}
	snap := r.Snapshot()
	if len(snap.Services) != 1 || snap.Services[0].Hostname != "cart.shop.svc.cluster.local" {
		t.Fatalf("services %+v", snap.Services)
	}
	eps := snap.Endpoints(snap.Services[0], 80)
	if len(eps) != 2 || eps[0].Address != "10.0.0.1" || eps[1].Address != "10.0.0.3" {
		t.Errorf("cart's endpoints %+v: want the proxy's and vm2's", eps)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.namespaces["gone"]; ok || r.namespaces["shop"]["team"] != "a" {
		t.Errorf("namespaces %v", r.namespaces)
	}
	if _, ok := r.selecting["shop"][ledger.Key()]; ok {
		t.Error("the deleted ledger still selects workloads")
	}
}
