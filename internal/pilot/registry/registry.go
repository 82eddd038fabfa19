// Package registry is the control plane's service registry: the services that
// Kubernetes Services and ServiceEntries declare, the workloads that
// WorkloadEntries declare and connected proxies report, and the endpoints that
// join them (the workloads a service selects). It tells the push pipeline what
// each change means: a service change is a full push, a workload change an
// endpoint (EDS) push for the services that select it.
package registry

import (
	"cmp"
	"slices"
	"sync"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// InboundType is how a change is counted in pilot_inbound_updates.
type InboundType string

// istiod's inbound update types.
const (
	InboundConfig    InboundType = "config"
	InboundEDS       InboundType = "eds"
	InboundSvc       InboundType = "svc"
	InboundSvcDelete InboundType = "svcdelete"
)

// Notify receives the push each change calls for.
type Notify func(InboundType, *model.PushRequest)

// DefaultGracePeriod is how long a disconnected proxy's workload stays
// registered, so that a reconnecting proxy does not flap its endpoints (istiod's
// PILOT_WORKLOAD_ENTRY_GRACE_PERIOD default).
const DefaultGracePeriod = 10 * time.Second

// Options configure a Registry.
type Options struct {
	DomainSuffix string        // "cluster.local" if empty
	GracePeriod  time.Duration // DefaultGracePeriod if zero
	// NamespaceSelected applies discoverySelectors: objects in a namespace it
	// rejects are invisible. nil selects every namespace.
	NamespaceSelected func(namespace string, labels map[string]string) bool
	// AfterFunc schedules the removal of a disconnected proxy; time.AfterFunc if
	// nil. Tests replace it to run removals when they choose.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	Now       func() time.Time
	// EndpointSlices says the registry is fed from a Kubernetes cluster:
	// a Kubernetes Service's endpoints are then its EndpointSlices'
	// (SetEndpointSlice), as istiod takes them, not the workloads its
	// selector picks, which would count a connected sidecar's pod twice.
	EndpointSlices bool
}

// Registry holds services, workloads and namespaces. It is safe for concurrent
// use: config events and proxy connections arrive from different goroutines.
type Registry struct {
	opts   Options
	notify Notify

	mu       sync.Mutex
	services map[config.Key]*config.Resource // Services and ServiceEntries
	// selecting indexes, by namespace, the services of those resources
	// that select workloads (a selector; not fed by EndpointSlices): a
	// service selects only its own namespace's workloads, so a workload's
	// change looks at its namespace's, not at every service of the mesh
	// (which made each proxy's connect cost grow with the mesh). Read
	// only: they are parsed once per change of their resource.
	selecting map[string]map[config.Key][]*model.Service
	// parsed are the services of every Service and ServiceEntry, by
	// namespace, parsed once per change of their resource; selecting
	// and the snapshots share them.
	parsed      map[string]map[config.Key][]*model.Service
	workloads   map[string]*workload                      // by id
	workloadsIn map[string]map[string]*workload           // by namespace, then id
	namespaces  map[string]map[string]string              // labels by namespace
	proxies     map[string]*proxyEntry                    // connected or in grace, by node id
	slices      map[config.Key]map[string][]SliceEndpoint // by Service, then EndpointSlice name

	proxiesChanged chan struct{} // see ProxiesChanged

	// The snapshot cache (see Snapshot): the last snapshot handed out,
	// and what changed since.
	lastSnapshot *Snapshot
	// dirty are the namespaces whose services, workloads, slices or
	// visibility changed since lastSnapshot. Each write to services,
	// workloads, slices or namespaces marks its namespace: in
	// putWorkloadLocked, deleteWorkloadLocked, putServiceLocked,
	// namespaceLocked, SetEndpointSlice and DeleteEndpointSlice.
	dirty map[string]bool
	// labelsChanged: some namespace's labels changed since lastSnapshot.
	labelsChanged bool
}

type proxyEntry struct {
	connections int
	removal     func() bool // stops a pending removal
}

// New returns an empty registry that reports what changes mean to notify.
func New(opts Options, notify Notify) *Registry {
	if opts.DomainSuffix == "" {
		opts.DomainSuffix = "cluster.local"
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{
		opts: opts, notify: notify,
		services:    map[config.Key]*config.Resource{},
		selecting:   map[string]map[config.Key][]*model.Service{},
		parsed:      map[string]map[config.Key][]*model.Service{},
		workloads:   map[string]*workload{},
		workloadsIn: map[string]map[string]*workload{},
		dirty:       map[string]bool{},
		namespaces:  map[string]map[string]string{},
		proxies:     map[string]*proxyEntry{},
		slices:      map[config.Key]map[string][]SliceEndpoint{},

		proxiesChanged: make(chan struct{}, 1),
	}
}

// Update applies one config change (old nil: added; new nil: deleted) of a kind
// the registry holds: Namespace, Service, ServiceEntry, WorkloadEntry. Other
// kinds are ignored. A WorkloadEntry change is an endpoint push of the
// services selecting it, or of the entry itself when none does (node proxies
// list every workload).
func (r *Registry) Update(old, new *config.Resource) {
	cur := new
	if cur == nil {
		cur = old
	}
	if cur == nil {
		return
	}
	r.mu.Lock()
	typ, req := r.updateLocked(cur.Kind, old, new)
	r.mu.Unlock()
	if req != nil {
		r.notify(typ, req)
	}
}

// ConfigKinds are the config kinds the registry holds (see Update).
var ConfigKinds = []config.Kind{config.KindNamespace, config.KindService, config.KindServiceEntry, config.KindWorkloadEntry}

// ReplaceConfig makes the registry's config-fed objects (ConfigKinds) those
// of listing, a full listing of the store: each listed one is applied, and
// each the registry holds that the listing lacks is removed. A watch that
// fell behind lost its events, deletions among them, so adding the listing
// alone would keep what was deleted meanwhile. Workloads that proxies,
// pods or EndpointSlices registered are kept. It notifies nothing: the
// caller pushes everything after a relist.
func (r *Registry) ReplaceConfig(listing []*config.Resource) {
	listed := make(map[config.Key]bool, len(listing))
	for _, res := range listing {
		if slices.Contains(ConfigKinds, res.Kind) {
			listed[res.Key()] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// What the registry holds of each kind, as the key Update was given.
	var gone []*config.Resource
	for k, res := range r.services {
		if !listed[k] {
			gone = append(gone, res)
		}
	}
	for ns := range r.namespaces {
		if k := (config.Key{Kind: config.KindNamespace, Name: ns}); !listed[k] {
			gone = append(gone, &config.Resource{Kind: k.Kind, Meta: metav1.ObjectMeta{Name: ns}})
		}
	}
	for _, w := range r.workloads {
		k := config.Key{Kind: config.KindWorkloadEntry, Namespace: w.namespace, Name: w.name}
		if w.id == k.String() && !listed[k] {
			gone = append(gone, &config.Resource{Kind: k.Kind, Meta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name}})
		}
	}
	for _, res := range gone {
		r.updateLocked(res.Kind, res, nil)
	}
	for _, res := range listing {
		if slices.Contains(ConfigKinds, res.Kind) {
			r.updateLocked(res.Kind, r.services[res.Key()], res)
		}
	}
}

func (r *Registry) updateLocked(kind config.Kind, old, new *config.Resource) (InboundType, *model.PushRequest) {
	now := r.opts.Now()
	switch kind {
	case config.KindNamespace:
		return r.namespaceLocked(old, new, now)
	case config.KindService, config.KindServiceEntry:
		cur := cmp.Or(new, old)
		r.putServiceLocked(old, new)
		if !r.visibleLocked(cur.Meta.Namespace) {
			return "", nil
		}
		typ := InboundSvc
		if new == nil {
			typ = InboundSvcDelete
		}
		return typ, model.NewPushRequest(model.ReasonService, true, now, cur.Key())
	case config.KindWorkloadEntry:
		var before, after *workload
		if old != nil {
			before = r.deleteWorkloadLocked(old.Key().String())
		}
		if new != nil {
			if we, ok := new.Spec.(*networking.WorkloadEntry); ok {
				after = fromWorkloadEntry(new, we)
				r.putWorkloadLocked(after)
			}
		}
		typ, req := r.endpointChangeLocked(before, after, now)
		if cur := cmp.Or(new, old); req == nil && r.visibleLocked(cur.Meta.Namespace) {
			// No service selects it, but node proxies list every workload.
			return InboundEDS, model.NewPushRequest(model.ReasonEndpoint, false, now, cur.Key())
		}
		return typ, req
	}
	return "", nil
}

// namespaceLocked records a namespace's labels; when discoverySelectors make
// that change what is visible, everything must be pushed again.
func (r *Registry) namespaceLocked(old, new *config.Resource, now time.Time) (InboundType, *model.PushRequest) {
	cur := new
	if new == nil {
		cur = old
	}
	ns := cur.Meta.Name
	wasVisible := r.visibleLocked(ns)
	if new == nil {
		delete(r.namespaces, ns)
	} else {
		r.namespaces[ns] = new.Meta.Labels
	}
	// Labels decide the namespace's visibility alone (discoverySelectors
	// look at no other namespace), and the snapshot's Namespaces copy.
	r.labelsChanged = true
	r.dirty[ns] = true
	if r.visibleLocked(ns) == wasVisible {
		return "", nil
	}
	return InboundConfig, model.NewPushRequest(model.ReasonNamespace, true, now, cur.Key())
}

// visibleLocked applies discoverySelectors to a namespace.
func (r *Registry) visibleLocked(namespace string) bool {
	if r.opts.NamespaceSelected == nil {
		return true
	}
	return r.opts.NamespaceSelected(namespace, r.namespaces[namespace])
}

// putServiceLocked records a Service or ServiceEntry change (old nil:
// added; new nil: deleted): the resource, its parsed services, and the
// selecting index.
func (r *Registry) putServiceLocked(old, new *config.Resource) {
	if old != nil {
		delete(r.services, old.Key())
		deleteIn(r.parsed, old.Meta.Namespace, old.Key())
		deleteIn(r.selecting, old.Meta.Namespace, old.Key())
		r.dirty[old.Meta.Namespace] = true
	}
	if new == nil {
		return
	}
	r.services[new.Key()] = new
	parsed := servicesOf(new, r.opts.DomainSuffix)
	putIn(r.parsed, new.Meta.Namespace, new.Key(), parsed)
	r.dirty[new.Meta.Namespace] = true
	if r.fromSlices(new) {
		return // its endpoints move with its slices, not with workloads
	}
	var selecting []*model.Service
	for _, s := range parsed {
		if len(s.Selector) > 0 {
			selecting = append(selecting, s)
		}
	}
	if len(selecting) > 0 {
		putIn(r.selecting, new.Meta.Namespace, new.Key(), selecting)
	}
}

// putWorkloadLocked registers a workload (replacing the one with its id).
func (r *Registry) putWorkloadLocked(w *workload) {
	r.deleteWorkloadLocked(w.id) // it may have moved namespace
	r.workloads[w.id] = w
	putIn(r.workloadsIn, w.namespace, w.id, w)
	r.dirty[w.namespace] = true
}

// deleteWorkloadLocked removes the workload with the id and returns it (nil
// if there was none).
func (r *Registry) deleteWorkloadLocked(id string) *workload {
	w := r.workloads[id]
	if w == nil {
		return nil
	}
	delete(r.workloads, id)
	deleteIn(r.workloadsIn, w.namespace, id)
	r.dirty[w.namespace] = true
	return w
}

// putIn sets an entry of a by-namespace index.
func putIn[K comparable, V any](index map[string]map[K]V, namespace string, key K, value V) {
	byKey := index[namespace]
	if byKey == nil {
		byKey = map[K]V{}
		index[namespace] = byKey
	}
	byKey[key] = value
}

// deleteIn removes an entry of a by-namespace index, and the namespace's
// map when it empties.
func deleteIn[K comparable, V any](index map[string]map[K]V, namespace string, key K) {
	byKey := index[namespace]
	delete(byKey, key)
	if len(byKey) == 0 {
		delete(index, namespace)
	}
}

// endpointChangeLocked finds the services whose endpoints a workload change
// moves (those selecting it before or after) and asks for an EDS push of
// them. Only the workload's namespace holds such services.
func (r *Registry) endpointChangeLocked(before, after *workload, now time.Time) (InboundType, *model.PushRequest) {
	var keys []config.Key
	seen := map[config.Key]bool{}
	for _, w := range []*workload{before, after} {
		if w == nil || !r.visibleLocked(w.namespace) {
			continue
		}
		for _, services := range r.selecting[w.namespace] {
			for _, s := range services {
				if !seen[s.Key] && selects(s, w) {
					seen[s.Key] = true
					keys = append(keys, s.Key)
				}
			}
		}
	}
	if len(keys) == 0 {
		return "", nil
	}
	return InboundEDS, model.NewPushRequest(model.ReasonEndpoint, false, now, keys...)
}

// ProxyConnected registers the proxy as a workload (from its node metadata).
// A proxy that reconnects within the grace period keeps its registration.
func (r *Registry) ProxyConnected(p *model.Proxy) {
	r.mu.Lock()
	e := r.proxies[p.ID]
	if e == nil {
		e = &proxyEntry{}
		r.proxies[p.ID] = e
	}
	e.connections++
	if e.removal != nil {
		e.removal()
		e.removal = nil
	}
	w := fromProxy(p)
	before := r.workloads[w.id]
	r.putWorkloadLocked(w)
	typ, req := r.endpointChangeLocked(before, w, r.opts.Now())
	changed := before == nil || !sameWorkload(before, w)
	if !changed {
		req = nil // a reconnect with the same metadata changes no endpoint
	}
	r.mu.Unlock()
	if changed {
		r.signalProxiesChanged()
	}
	if req != nil {
		r.notify(typ, req)
	}
}

// ProxyDisconnected schedules the proxy's workload for removal after the grace
// period, unless it reconnects first.
func (r *Registry) ProxyDisconnected(p *model.Proxy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.proxies[p.ID]
	if e == nil {
		return
	}
	if e.connections--; e.connections > 0 {
		return
	}
	e.removal = r.opts.AfterFunc(r.opts.GracePeriod, func() { r.removeProxy(p.ID) })
}

func (r *Registry) removeProxy(id string) {
	r.mu.Lock()
	e := r.proxies[id]
	if e == nil || e.connections > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.proxies, id)
	before := r.deleteWorkloadLocked(proxyIDPrefix + id)
	typ, req := r.endpointChangeLocked(before, nil, r.opts.Now())
	r.mu.Unlock()
	r.signalProxiesChanged()
	if req != nil {
		r.notify(typ, req)
	}
}

func sameWorkload(a, b *workload) bool {
	return a.address == b.address && a.serviceAccount == b.serviceAccount && a.name == b.name &&
		mapsEqual(a.labels, b.labels)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ServiceCount is the number of services (hostnames) known, for pilot_services.
func (r *Registry) ServiceCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, res := range r.services {
		if !r.visibleLocked(res.Meta.Namespace) {
			continue
		}
		switch spec := res.Spec.(type) {
		case *corev1.ServiceSpec:
			n++
		case *networking.ServiceEntry:
			n += len(spec.GetHosts())
		}
	}
	return n
}
