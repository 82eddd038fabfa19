package registry

import (
	"sort"
	"time"
)

// A sidecar's endpoint exists in meshperf pilot because the sidecar is
// connected: there is no Kubernetes Endpoints API holding it independently,
// as there is for istiod. So that a restarted control plane does not push
// "no endpoints" to the first proxy that reconnects while the others are
// still backing off (every request to them failing meanwhile), the
// registrations are saved (ProxyRecords) and restored at start in their
// grace period, as if they had just disconnected: a proxy that reconnects
// keeps its registration; one that does not is removed when the grace
// period ends, as istiod removes an auto-registered WorkloadEntry.

// ProxyRecord is what a proxy's registration holds: enough to rebuild its
// workload without its connection.
type ProxyRecord struct {
	ID             string            `json:"id"`
	Namespace      string            `json:"namespace"`
	Name           string            `json:"name"`
	Address        string            `json:"address"`
	Labels         map[string]string `json:"labels,omitempty"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
}

// ProxyRecords returns the registered proxies (connected or in their grace
// period), sorted by id.
func (r *Registry) ProxyRecords() []ProxyRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ProxyRecord, 0, len(r.proxies))
	for id := range r.proxies {
		w := r.workloads[proxyIDPrefix+id]
		if w == nil {
			continue
		}
		out = append(out, ProxyRecord{ID: id, Namespace: w.namespace, Name: w.name, Address: w.address,
			Labels: w.labels, ServiceAccount: w.serviceAccount})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ProxiesChanged is signalled (without blocking, coalesced) when a proxy is
// registered or removed, for whoever saves ProxyRecords.
func (r *Registry) ProxiesChanged() <-chan struct{} { return r.proxiesChanged }

func (r *Registry) signalProxiesChanged() {
	select {
	case r.proxiesChanged <- struct{}{}:
	default:
	}
}

// Restore registers saved proxies as disconnected ones in their grace
// period. Call it before serving: a proxy already connected keeps its live
// registration.
func (r *Registry) Restore(records []ProxyRecord) {
	for _, rec := range records {
		if rec.ID == "" {
			continue
		}
		r.mu.Lock()
		if r.proxies[rec.ID] != nil {
			r.mu.Unlock()
			continue
		}
		e := &proxyEntry{}
		r.proxies[rec.ID] = e
		w := &workload{id: proxyIDPrefix + rec.ID, namespace: rec.Namespace, name: rec.Name, address: rec.Address,
			labels: rec.Labels, serviceAccount: rec.ServiceAccount, tlsMode: "istio"}
		before := r.workloads[w.id]
		r.putWorkloadLocked(w)
		typ, req := r.endpointChangeLocked(before, w, r.opts.Now())
		id := rec.ID
		e.removal = r.opts.AfterFunc(r.opts.GracePeriod, func() { r.removeProxy(id) })
		r.mu.Unlock()
		if req != nil {
			r.notify(typ, req)
		}
	}
}

// GracePeriod is how long a disconnected (or restored) proxy stays
// registered.
func (r *Registry) GracePeriod() time.Duration { return r.opts.GracePeriod }
