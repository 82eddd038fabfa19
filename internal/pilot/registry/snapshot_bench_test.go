package registry

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// tenTimesIstio is issue 22's 10x mesh: 500 namespaces of 20 services, each
// selecting 2 connected sidecars (20,000 proxies), as cpload's uniform
// shape with -sidecar namespace registers them.
func tenTimesIstio(b *testing.B) (*Registry, []*model.Proxy) {
	const namespaces, services, replicas = 500, 20, 2
	r := New(Options{}, func(InboundType, *model.PushRequest) {})
	var proxies []*model.Proxy
	for n := range namespaces {
		ns := "ns-" + strconv.Itoa(n)
		for s := range services {
			app := "svc-" + strconv.Itoa(s)
			r.Update(nil, kubeService(ns, app, map[string]string{"app": app},
				corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}))
			for i := range replicas {
				ip := len(proxies) + 1
				p := &model.Proxy{ID: "sidecar~" + strconv.Itoa(ip), Namespace: ns, WorkloadName: app + "-" + strconv.Itoa(i),
					Labels:      map[string]string{"app": app},
					IPAddresses: []string{"10." + strconv.Itoa(ip>>16) + "." + strconv.Itoa(ip>>8&255) + "." + strconv.Itoa(ip&255)}}
				r.ProxyConnected(p)
				proxies = append(proxies, p)
			}
		}
	}
	r.Snapshot()
	return r, proxies
}

// BenchmarkSnapshotAfterOneChange is the snapshot a push takes after one
// change in one namespace of the 10x mesh, against the full build each
// snapshot was before the cache.
func BenchmarkSnapshotAfterOneChange(b *testing.B) {
	r, proxies := tenTimesIstio(b)
	b.Run("full-build", func(b *testing.B) {
		for b.Loop() {
			snapshotFromScratch(r)
		}
	})
	b.Run("endpoint-change", func(b *testing.B) {
		// A sidecar re-registers with other labels: its namespace's
		// endpoints move, no service does.
		p := *proxies[len(proxies)/2]
		for i := 0; b.Loop(); i++ {
			p.Labels = map[string]string{"app": "svc-" + strconv.Itoa(i%2)}
			r.ProxyConnected(&p)
			r.Snapshot()
		}
	})
	b.Run("service-change", func(b *testing.B) {
		// A Service's port changes, as cpload's config churn changes a
		// ServiceEntry: the services list and hostname index change too.
		for i := 0; b.Loop(); i++ {
			r.Update(nil, kubeService("ns-250", "svc-3", map[string]string{"app": "svc-3"},
				corev1.ServicePort{Name: "http", Port: 8080 + int32(i%2), TargetPort: intstr.FromInt32(8080)}))
			r.Snapshot()
		}
	})
	b.Run("no-change", func(b *testing.B) {
		for b.Loop() {
			r.Snapshot()
		}
	})
}
