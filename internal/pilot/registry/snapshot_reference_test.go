package registry

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// referenceSnapshot is what a snapshot holds as the registry's walk over
// the whole mesh made it before the per-namespace cache, rendered as
// sorted lines: every service of a visible namespace, parsed anew, with
// the workloads of its namespace that it selects (no sidecar at a
// declared workload's address), for comparison with the cached
// snapshot's rendering. Orders that the walk left to map iteration
// (services sharing a hostname and a namespace) are not compared.
func referenceSnapshot(r *Registry) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	declared := map[string]bool{}
	for _, w := range r.workloads {
		if !strings.HasPrefix(w.id, proxyIDPrefix) {
			declared[w.namespace+"/"+w.address] = true
		}
	}
	var members []*workload
	views := map[*workload]*model.Workload{}
	for _, w := range r.workloads {
		if !r.visibleLocked(w.namespace) || strings.HasPrefix(w.id, proxyIDPrefix) && declared[w.namespace+"/"+w.address] {
			continue
		}
		members = append(members, w)
		views[w] = w.view()
	}
	var services []*model.Service
	endpoints := map[*model.Service][]*model.Endpoint{}
	for _, res := range r.services {
		if !r.visibleLocked(res.Meta.Namespace) {
			continue
		}
		for _, svc := range servicesOf(res, r.opts.DomainSuffix) {
			services = append(services, svc)
			eps := inlineEndpoints(svc, res)
			if r.fromSlices(res) {
				eps = sliceEndpoints(svc, res, r.slices[res.Key()])
			}
			for _, w := range members {
				if !selects(svc, w) {
					continue
				}
				if r.fromSlices(res) {
					views[w].Services = append(views[w].Services, w.selectedBy(svc, res))
					continue
				}
				selected := endpointsFor(svc, w)
				eps = append(eps, selected...)
				views[w].Services = append(views[w].Services, workloadService(svc, selected))
			}
			endpoints[svc] = eps
		}
	}
	var workloads []*model.Workload
	for _, v := range views {
		workloads = append(workloads, v)
	}
	namespaces := maps.Clone(r.namespaces)
	return renderSnapshot(services, workloads, namespaces, func(svc *model.Service, port uint32) []*model.Endpoint {
		var out []*model.Endpoint
		for _, e := range endpoints[svc] {
			if e.ServicePort == port {
				out = append(out, e)
			}
		}
		return out
	})
}

// renderSnapshot renders a snapshot's content as sorted lines (see
// referenceSnapshot).
func renderSnapshot(services []*model.Service, workloads []*model.Workload, namespaces map[string]map[string]string,
	endpoints func(*model.Service, uint32) []*model.Endpoint) []string {
	lines := []string{fmt.Sprint("namespaces ", namespaces)}
	declarations := map[string]int{}
	for _, svc := range services {
		declarations[svc.Namespace+"/"+svc.Hostname]++
	}
	for _, svc := range services {
		lines = append(lines, fmt.Sprintf("service %s %s %v %v", svc.Hostname, svc.Key, svc.Ports, svc.Selector))
		if declarations[svc.Namespace+"/"+svc.Hostname] > 1 {
			continue // the walk kept one of their endpoint lists, at random
		}
		for _, port := range svc.Ports {
			var eps []string
			for _, e := range endpoints(svc, port.Number) {
				eps = append(eps, fmt.Sprintf("%s:%d %v %s %s %s %s", e.Address, e.Port, e.Labels, e.Namespace, e.WorkloadName, e.TLSMode, e.Locality))
			}
			slices.Sort(eps)
			lines = append(lines, fmt.Sprintf("endpoints %s %s %d: %q", svc.Hostname, svc.Namespace, port.Number, eps))
		}
	}
	for _, w := range workloads {
		var selecting []string
		for _, ws := range w.Services {
			selecting = append(selecting, fmt.Sprintf("%s %s %v", ws.Service.Hostname, ws.Service.Key, ws.Ports))
		}
		slices.Sort(selecting)
		lines = append(lines, fmt.Sprintf("workload %s/%s %s %v %s entry=%v pod=%v %s %s ready=%v sidecar=%v: %q",
			w.Namespace, w.Name, w.Address, w.Labels, w.ServiceAccount, w.FromEntry, w.FromPod, w.Node, w.WorkloadName,
			!w.NotReady, w.Sidecar, selecting))
	}
	slices.Sort(lines)
	return lines
}

func renderCached(s *Snapshot) []string {
	return renderSnapshot(s.Services, s.Workloads, s.Namespaces, s.Endpoints)
}

// TestSnapshotHoldsWhatTheWholeMeshWalkHeld: the cached snapshot has the
// content the walk over the whole mesh gave before it, in the orders the
// Snapshot documents, and its indexes agree with its lists.
func TestSnapshotHoldsWhatTheWholeMeshWalkHeld(t *testing.T) {
	for _, fromSlices := range []bool{false, true} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("slices=%v/seed=%d", fromSlices, seed), func(t *testing.T) {
				timers := &manualTimers{}
				r := New(Options{EndpointSlices: fromSlices, AfterFunc: timers.afterFunc,
					NamespaceSelected: func(_ string, labels map[string]string) bool { return labels["hidden"] != "true" },
				}, func(InboundType, *model.PushRequest) {})
				m := &mutator{rng: rand.New(rand.NewPCG(seed, 7)), r: r, timers: timers,
					config: map[config.Key]*config.Resource{}, proxies: map[string]*model.Proxy{}}
				for i := range 200 {
					change := m.step()
					snap := r.Snapshot()
					if got, want := renderCached(snap), referenceSnapshot(r); !slices.Equal(got, want) {
						t.Fatalf("step %d (%s): snapshot\n%s\nwant\n%s", i, change, strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
					checkSnapshotOrders(t, snap)
				}
			})
		}
	}
}

// checkSnapshotOrders checks the documented orders, and that
// ServicesByHostname and ServicesIn are Services grouped.
func checkSnapshotOrders(t *testing.T, s *Snapshot) {
	t.Helper()
	if !slices.IsSortedFunc(s.Services, func(a, b *model.Service) int {
		return cmp.Or(strings.Compare(a.Hostname, b.Hostname), strings.Compare(a.Namespace, b.Namespace))
	}) {
		t.Fatal("services are not sorted by hostname, then namespace")
	}
	if !slices.IsSortedFunc(s.Workloads, func(a, b *model.Workload) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.Address, b.Namespace+"\x00"+b.Name+"\x00"+b.Address)
	}) {
		t.Fatal("workloads are not sorted by namespace, then name, then address")
	}
	byHostname, in := map[string][]*model.Service{}, map[string][]*model.Service{}
	for _, svc := range s.Services {
		byHostname[svc.Hostname] = append(byHostname[svc.Hostname], svc)
		in[svc.Namespace] = append(in[svc.Namespace], svc)
	}
	for host, want := range byHostname {
		if got := s.ServicesByHostname(host); !slices.Equal(got, want) {
			t.Fatalf("ServicesByHostname(%s) = %v, want %v", host, got, want)
		}
	}
	if len(s.byHostname) != len(byHostname) {
		t.Fatalf("%d hostnames indexed, %d declared", len(s.byHostname), len(byHostname))
	}
	for ns, want := range in {
		if got := s.ServicesIn(ns); !slices.Equal(got, want) {
			t.Fatalf("ServicesIn(%s) = %v, want %v", ns, got, want)
		}
	}
}
