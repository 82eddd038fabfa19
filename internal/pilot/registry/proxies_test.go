package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// A restarted control plane restores the registrations the previous one
// saved: the endpoints are there before any proxy reconnects, a proxy that
// reconnects keeps its registration, and one that does not is removed when
// the grace period ends.
func TestRestoredProxiesServeUntilTheyReconnectOrTheGraceEnds(t *testing.T) {
	before, _, _ := newTestRegistry(Options{})
	cart := &model.Proxy{ID: "sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", Namespace: "shop", WorkloadName: "cart",
		IPAddresses: []string{"10.0.0.1"}, Labels: map[string]string{"app": "cart"}, ServiceAccount: "cart"}
	gone := &model.Proxy{ID: "sidecar~10.0.0.2~cart-2.shop~shop.svc.cluster.local", Namespace: "shop", WorkloadName: "cart",
		IPAddresses: []string{"10.0.0.2"}, Labels: map[string]string{"app": "cart"}, ServiceAccount: "cart"}
	before.ProxyConnected(cart)
	select {
	case <-before.ProxiesChanged():
	default:
		t.Error("a new registration did not signal ProxiesChanged")
	}
	before.ProxyConnected(gone)
	saved := before.ProxyRecords()
	if len(saved) != 2 || saved[0].Address != "10.0.0.1" || saved[0].Labels["app"] != "cart" || saved[0].ServiceAccount != "cart" {
		t.Fatalf("records %+v", saved)
	}

	r, _, timers := newTestRegistry(Options{})
	r.Update(nil, kubeService("shop", "cart", map[string]string{"app": "cart"}, corev1.ServicePort{Name: "http", Port: 80}))
	r.Restore(saved)
	if n := len(r.Snapshot().Endpoints(r.Snapshot().Services[0], 80)); n != 2 {
		t.Fatalf("%d endpoints right after the restore, want the 2 saved", n)
	}
	r.ProxyConnected(cart) // reconnects; the other does not
	timers.fire()
	eps := r.Snapshot().Endpoints(r.Snapshot().Services[0], 80)
	if len(eps) != 1 || eps[0].Address != "10.0.0.1" {
		t.Errorf("after the grace period: endpoints %+v, want only the reconnected proxy's", eps)
	}
	if recs := r.ProxyRecords(); len(recs) != 1 || recs[0].ID != cart.ID {
		t.Errorf("records after the grace period %+v", recs)
	}
}
