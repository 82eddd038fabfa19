package registry

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Snapshot is the registry at one moment, for one push: immutable, shared by
// every proxy's generation. Successive snapshots share what did not change
// between them (namespace pieces, services, the Namespaces map), so nothing
// in one may be modified.
type Snapshot struct {
	// Services are sorted by hostname, then namespace (then by the
	// resource's kind and name, for a hostname that two resources of one
	// namespace declare).
	Services []*model.Service
	// Workloads are the WorkloadEntries, Pods and registered sidecars, sorted by
	// namespace, then name, then address.
	Workloads  []*model.Workload
	Namespaces map[string]map[string]string
	// byHostname: each hostname's services, in the order of Services.
	byHostname map[string][]*model.Service
	// pieces are the visible namespaces' services, endpoints and
	// workloads: a service selects only its own namespace's workloads,
	// so a change rebuilds its namespace's piece and no other.
	pieces map[string]*namespacePiece
	order  []string // the pieces' namespaces, sorted
}

// namespacePiece is what one namespace contributes to a snapshot. Once in
// a snapshot it is never modified: a change builds a new one.
type namespacePiece struct {
	// services are sorted as Snapshot.Services. A proxy's inbound side
	// looks only at its namespace's services (ServicesIn), and looking
	// through all of them per proxy made each proxy's config cost grow
	// with the mesh.
	services []*model.Service
	// endpoints by hostname (a hostname is unique within a namespace; if
	// two resources declare one, the later in services order wins), each
	// sorted by address, then port.
	endpoints map[string][]*model.Endpoint
	workloads []*model.Workload // sorted by name, then address
}

func (p *namespacePiece) servicesOrNone() []*model.Service {
	if p == nil {
		return nil
	}
	return p.services
}

// Endpoints returns the endpoints of a service port, sorted by address.
func (s *Snapshot) Endpoints(svc *model.Service, port uint32) []*model.Endpoint {
	p := s.pieces[svc.Namespace]
	if p == nil {
		return nil
	}
	var out []*model.Endpoint
	for _, e := range p.endpoints[svc.Hostname] {
		if e.ServicePort == port {
			out = append(out, e)
		}
	}
	return out
}

// ServicesByHostname returns the services with that hostname (one per namespace
// that declares it), sorted by namespace.
func (s *Snapshot) ServicesByHostname(host string) []*model.Service { return s.byHostname[host] }

// ServicesIn returns the services of a namespace, sorted by hostname.
func (s *Snapshot) ServicesIn(namespace string) []*model.Service {
	return s.pieces[namespace].servicesOrNone()
}

// Snapshot returns the registry's current state, applying
// discoverySelectors. Every push takes one, and walking the whole mesh each
// time (every service against every workload of its namespace) was most of
// pilot's CPU at 10,000 services during config churn, although a change
// touches one namespace: so the last snapshot is kept, and a new one
// rebuilds only the namespaces changed since and shares the rest. With
// nothing changed it is the last snapshot again.
func (r *Registry) Snapshot() *Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastSnapshot != nil && len(r.dirty) == 0 && !r.labelsChanged {
		return r.lastSnapshot
	}
	r.lastSnapshot = r.assembleLocked(r.lastSnapshot, r.dirty, r.labelsChanged)
	clear(r.dirty)
	r.labelsChanged = false
	return r.lastSnapshot
}

// assembleLocked builds a snapshot from last (nil: none) by rebuilding the
// pieces of the changed namespaces. It changes neither last nor the
// registry.
func (r *Registry) assembleLocked(last *Snapshot, changed map[string]bool, labelsChanged bool) *Snapshot {
	if last == nil {
		last = &Snapshot{}
		labelsChanged = true
	}
	next := &Snapshot{
		Services: last.Services, byHostname: last.byHostname, Namespaces: last.Namespaces,
		pieces: maps.Clone(last.pieces), order: last.order,
	}
	if next.pieces == nil {
		next.pieces = map[string]*namespacePiece{}
	}
	if labelsChanged {
		next.Namespaces = maps.Clone(r.namespaces)
	}
	// The namespaces whose services changed, with their services before.
	servicesBefore := map[string][]*model.Service{}
	workloadsChanged, orderChanged := false, false
	for ns := range changed {
		before := next.pieces[ns]
		after := r.buildPieceLocked(ns)
		orderChanged = orderChanged || (before == nil) != (after == nil)
		if after == nil {
			delete(next.pieces, ns)
		} else {
			next.pieces[ns] = after
		}
		// Services are parsed once per change of their resource, so a
		// workload change leaves the same ones: the global lists stay.
		if !slices.Equal(before.servicesOrNone(), after.servicesOrNone()) {
			servicesBefore[ns] = before.servicesOrNone()
		}
		workloadsChanged = workloadsChanged || before != nil && len(before.workloads) > 0 || after != nil && len(after.workloads) > 0
	}
	if len(servicesBefore) > 0 {
		next.Services, next.byHostname = replaceServices(last.Services, last.byHostname, servicesBefore, next.pieces)
	}
	if orderChanged {
		next.order = slices.Sorted(maps.Keys(next.pieces))
	}
	if workloadsChanged {
		// Namespace order is the Workloads order, so they are the pieces'
		// lists end to end: a copy of pointers, no comparisons.
		n := 0
		for _, ns := range next.order {
			n += len(next.pieces[ns].workloads)
		}
		next.Workloads = nil
		if n > 0 {
			next.Workloads = make([]*model.Workload, 0, n)
		}
		for _, ns := range next.order {
			next.Workloads = append(next.Workloads, next.pieces[ns].workloads...)
		}
	} else {
		next.Workloads = last.Workloads
	}
	return next
}

// replaceServices returns the sorted services and the by-hostname index
// with the services of the namespaces in before (their services in the
// old lists) replaced by those of their new pieces. The old services are
// found and the new ones placed by binary search, and the rest is copied
// in runs: a change costs a copy of the list, not a comparison per
// service. Only the hostnames concerned are indexed again, on a copy.
func replaceServices(services []*model.Service, byHostname map[string][]*model.Service,
	before map[string][]*model.Service, pieces map[string]*namespacePiece) ([]*model.Service, map[string][]*model.Service) {
	// An edit inserts add before services[at], or drops services[at] (add nil).
	type edit struct {
		at  int
		add *model.Service
	}
	var edits []edit
	for ns, old := range before {
		for _, svc := range old {
			i, _ := slices.BinarySearchFunc(services, svc, compareServices)
			for services[i] != svc { // past services that compare equal
				i++
			}
			edits = append(edits, edit{at: i})
		}
		for _, svc := range pieces[ns].servicesOrNone() {
			i, _ := slices.BinarySearchFunc(services, svc, compareServices)
			edits = append(edits, edit{at: i, add: svc})
		}
	}
	// Insertions before the drop at the same place (the drop would skip
	// past them); insertions at one place in their own order.
	slices.SortStableFunc(edits, func(a, b edit) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if (a.add == nil) != (b.add == nil) {
			if a.add != nil {
				return -1
			}
			return 1
		}
		if a.add == nil {
			return 0
		}
		return compareServices(a.add, b.add)
	})
	merged := make([]*model.Service, 0, len(services)+len(edits))
	next := 0 // services[next:] are still to copy
	for _, e := range edits {
		merged = append(merged, services[next:e.at]...)
		next = e.at
		if e.add != nil {
			merged = append(merged, e.add)
		} else {
			next++
		}
	}
	merged = append(merged, services[next:]...)
	if len(merged) == 0 {
		merged = nil // as a registry that never had services
	}

	index := maps.Clone(byHostname)
	if index == nil {
		index = map[string][]*model.Service{}
	}
	// The hostnames concerned: those the namespaces had and have.
	addedByHostname := map[string][]*model.Service{}
	for ns, old := range before {
		for _, svc := range old {
			if _, ok := addedByHostname[svc.Hostname]; !ok {
				addedByHostname[svc.Hostname] = nil // none, maybe: indexed again all the same
			}
		}
		for _, svc := range pieces[ns].servicesOrNone() {
			addedByHostname[svc.Hostname] = append(addedByHostname[svc.Hostname], svc)
		}
	}
	for host, added := range addedByHostname {
		var list []*model.Service
		for _, svc := range index[host] {
			if _, replaced := before[svc.Namespace]; !replaced {
				list = append(list, svc)
			}
		}
		list = append(list, added...)
		if len(list) == 0 {
			delete(index, host)
			continue
		}
		slices.SortStableFunc(list, compareServices)
		index[host] = list
	}
	if len(index) == 0 {
		index = nil
	}
	return merged, index
}

// compareServices orders services by hostname, then namespace, then the
// resource declaring them (kind, name), so that the order does not depend
// on map iteration even when two resources of a namespace declare one
// hostname.
// (Not cmp.Or: it would compare every field, and the first almost
// always decides.)
func compareServices(a, b *model.Service) int {
	if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return compareKeys(a.Key, b.Key)
}

func compareKeys(a, b config.Key) int {
	return cmp.Or(strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name))
}

// buildPieceLocked builds a namespace's piece: nil when the namespace is
// not visible or holds nothing.
func (r *Registry) buildPieceLocked(ns string) *namespacePiece {
	if !r.visibleLocked(ns) || len(r.parsed[ns]) == 0 && len(r.workloadsIn[ns]) == 0 {
		return nil
	}
	members := r.membersLocked(ns)
	views := make([]*model.Workload, len(members))
	for i, w := range members {
		views[i] = w.view()
	}
	p := &namespacePiece{workloads: views, endpoints: map[string][]*model.Endpoint{}}
	byKey := r.parsed[ns]
	for _, key := range slices.SortedFunc(maps.Keys(byKey), compareKeys) {
		res := r.services[key]
		fromSlices := r.fromSlices(res)
		for _, svc := range byKey[key] {
			p.services = append(p.services, svc)
			eps := inlineEndpoints(svc, res)
			if fromSlices {
				eps = sliceEndpoints(svc, res, r.slices[key])
			}
			for i, w := range members {
				if !selects(svc, w) {
					continue
				}
				if fromSlices {
					views[i].Services = append(views[i].Services, w.selectedBy(svc, res))
					continue
				}
				selected := endpointsFor(svc, w)
				eps = append(eps, selected...)
				views[i].Services = append(views[i].Services, workloadService(svc, selected))
			}
			// Stable: endpoints at one address and port (two workloads
			// sharing an address) keep the members' order.
			slices.SortStableFunc(eps, func(a, b *model.Endpoint) int {
				return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
			})
			p.endpoints[svc.Hostname] = eps
		}
	}
	slices.SortStableFunc(p.services, compareServices)
	for _, v := range views {
		slices.SortStableFunc(v.Services, func(a, b model.WorkloadService) int {
			return compareServices(a.Service, b.Service)
		})
	}
	return p
}

// membersLocked are the namespace's workloads that serve, sorted by name,
// then address (then id): all but the connected sidecars of the workloads
// the config declares (pods, WorkloadEntries), at whose "NS/IP" a sidecar
// is that workload's proxy, and registered as well it would be a service's
// endpoint twice.
func (r *Registry) membersLocked(ns string) []*workload {
	declared := map[string]bool{}
	for _, w := range r.workloadsIn[ns] {
		if !strings.HasPrefix(w.id, proxyIDPrefix) {
			declared[w.address] = true
		}
	}
	members := make([]*workload, 0, len(r.workloadsIn[ns]))
	for _, w := range r.workloadsIn[ns] {
		if strings.HasPrefix(w.id, proxyIDPrefix) && declared[w.address] {
			continue
		}
		members = append(members, w)
	}
	slices.SortFunc(members, func(a, b *workload) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.address, b.address), strings.Compare(a.id, b.id))
	})
	return members
}
