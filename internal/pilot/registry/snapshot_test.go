package registry

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// snapshotFromScratch builds the registry's snapshot with no cache: every
// namespace's piece rebuilt, as the first snapshot is.
func snapshotFromScratch(r *Registry) *Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := map[string]bool{}
	for ns := range r.parsed {
		all[ns] = true
	}
	for ns := range r.workloadsIn {
		all[ns] = true
	}
	return r.assembleLocked(nil, all, true)
}

// mutator applies random changes to a registry from a small world (three
// namespaces, few names and addresses) so that they collide: sidecars at
// declared workloads' addresses, hostnames declared in two namespaces and
// twice in one, proxies that reconnect in another namespace.
type mutator struct {
	rng     *rand.Rand
	r       *Registry
	timers  *manualTimers
	config  map[config.Key]*config.Resource // what Update was given, for deletions and ReplaceConfig
	proxies map[string]*model.Proxy         // connected
}

var (
	worldNamespaces = []string{"a", "b", "c"}
	worldApps       = []string{"x", "y"}
)

func (m *mutator) pick(list []string) string { return list[m.rng.IntN(len(list))] }

func (m *mutator) address() string { return "10.0.0." + strconv.Itoa(1+m.rng.IntN(6)) }

func (m *mutator) labels() map[string]string {
	if m.rng.IntN(5) == 0 {
		return nil
	}
	return map[string]string{"app": m.pick(worldApps)}
}

func (m *mutator) apply(res *config.Resource) {
	old := m.config[res.Key()]
	m.config[res.Key()] = res
	m.r.Update(old, res)
}

func (m *mutator) remove(kind config.Kind) string {
	var keys []config.Key
	for k := range m.config {
		if k.Kind == kind {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "nothing to delete"
	}
	slices.SortFunc(keys, compareKeys)
	k := keys[m.rng.IntN(len(keys))]
	old := m.config[k]
	delete(m.config, k)
	m.r.Update(old, nil)
	return "delete " + k.String()
}

// step applies one random change and says what it was.
func (m *mutator) step() string {
	ns := m.pick(worldNamespaces)
	switch m.rng.IntN(14) {
	case 0, 1:
		res := kubeService(ns, "s"+strconv.Itoa(m.rng.IntN(3)), m.labels(),
			corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
			corev1.ServicePort{Name: "tcp", Port: 90, TargetPort: intstr.FromInt32(int32(9000 + m.rng.IntN(3)))})
		m.apply(res)
		return "service " + res.Key().String()
	case 2:
		// Hostnames shared across namespaces and between two entries of one.
		res := &config.Resource{Kind: config.KindServiceEntry, Meta: meta(ns, "se"+strconv.Itoa(m.rng.IntN(2)), nil),
			Spec: &networking.ServiceEntry{
				Hosts:     []string{"ext.example.com", "h" + strconv.Itoa(m.rng.IntN(2)) + ".example.com"},
				Ports:     []*networking.ServicePort{{Name: "http", Number: 80, Protocol: "HTTP"}},
				Endpoints: []*networking.WorkloadEntry{{Address: m.address()}},
			}}
		if l := m.labels(); l != nil {
			res.Spec.(*networking.ServiceEntry).WorkloadSelector = &networking.WorkloadSelector{Labels: l}
		}
		m.apply(res)
		return "service entry " + res.Key().String()
	case 3:
		return m.remove(config.Kind([]config.Kind{config.KindService, config.KindServiceEntry}[m.rng.IntN(2)]))
	case 4:
		res := workloadEntry(ns, "we"+strconv.Itoa(m.rng.IntN(3)), m.address(), m.labels())
		m.apply(res)
		return "workload entry " + res.Key().String()
	case 5:
		return m.remove(config.KindWorkloadEntry)
	case 6:
		p := &PodWorkload{Namespace: ns, Name: "pod" + strconv.Itoa(m.rng.IntN(3)), Address: m.address(), Labels: m.labels(),
			Ready: m.rng.IntN(3) > 0, NamedPorts: map[string]uint32{"web": 8080}}
		m.r.SetPodWorkload(p)
		return "pod " + p.Namespace + "/" + p.Name
	case 7:
		name := "pod" + strconv.Itoa(m.rng.IntN(3))
		m.r.DeletePodWorkload(ns, name)
		return "delete pod " + ns + "/" + name
	case 8, 9:
		p := &model.Proxy{ID: "sidecar~" + strconv.Itoa(m.rng.IntN(6)), Namespace: ns, WorkloadName: "w" + strconv.Itoa(m.rng.IntN(3)),
			Labels: m.labels(), IPAddresses: []string{m.address()}}
		if old := m.proxies[p.ID]; old != nil {
			m.r.ProxyDisconnected(old)
		}
		m.proxies[p.ID] = p
		m.r.ProxyConnected(p)
		return "proxy connected " + p.ID + " in " + ns
	case 10:
		for _, id := range slices.Sorted(maps.Keys(m.proxies)) {
			if m.rng.IntN(2) == 0 {
				m.r.ProxyDisconnected(m.proxies[id])
				delete(m.proxies, id)
			}
		}
		m.timers.fire()
		return "proxies disconnected and removed"
	case 11:
		svc := config.Key{Kind: config.KindService, Namespace: ns, Name: "s" + strconv.Itoa(m.rng.IntN(3))}
		slice := "slice" + strconv.Itoa(m.rng.IntN(2))
		if m.rng.IntN(3) == 0 {
			m.r.DeleteEndpointSlice(svc, slice)
			return "delete slice " + svc.String() + " " + slice
		}
		m.r.SetEndpointSlice(svc, slice, []SliceEndpoint{{Address: m.address(), Ready: m.rng.IntN(3) > 0,
			Ports: map[string]uint32{"http": 8080, "tcp": 9000}, Namespace: ns, Labels: m.labels()}})
		return "slice " + svc.String() + " " + slice
	case 12:
		labels := map[string]string{"hidden": strconv.FormatBool(m.rng.IntN(3) == 0)}
		m.apply(&config.Resource{Kind: config.KindNamespace, Meta: meta("", ns, labels)})
		return "namespace " + ns + " " + fmt.Sprint(labels)
	default:
		// A relist that lost some of the config meanwhile.
		var listing []*config.Resource
		for _, k := range slices.SortedFunc(maps.Keys(m.config), compareKeys) {
			if m.rng.IntN(4) == 0 {
				delete(m.config, k)
				continue
			}
			listing = append(listing, m.config[k])
		}
		m.r.ReplaceConfig(listing)
		return "replace config"
	}
}

// TestSnapshotAfterChangesIsTheFromScratchOne: whatever the changes, the
// cached snapshot is the one a full build makes, and snapshots handed out
// earlier do not change. A mutation that forgets to mark its namespace
// makes the cached snapshot keep that namespace's old piece.
func TestSnapshotAfterChangesIsTheFromScratchOne(t *testing.T) {
	for _, fromSlices := range []bool{false, true} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("slices=%v/seed=%d", fromSlices, seed), func(t *testing.T) {
				timers := &manualTimers{}
				r := New(Options{
					EndpointSlices: fromSlices,
					AfterFunc:      timers.afterFunc,
					NamespaceSelected: func(_ string, labels map[string]string) bool {
						return labels["hidden"] != "true"
					},
				}, func(InboundType, *model.PushRequest) {})
				m := &mutator{rng: rand.New(rand.NewPCG(seed, 22)), r: r, timers: timers,
					config: map[config.Key]*config.Resource{}, proxies: map[string]*model.Proxy{}}
				var earlier, earlierExpected *Snapshot
				var history []string
				for range 300 {
					history = append(history, m.step())
					if m.rng.IntN(3) == 0 {
						continue // several changes between snapshots, too
					}
					got, want := r.Snapshot(), snapshotFromScratch(r)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("after %q, the cached snapshot differs from a full build:\n got %s\nwant %s",
							history, describeSnapshot(got), describeSnapshot(want))
					}
					if earlier != nil && !reflect.DeepEqual(earlier, earlierExpected) {
						t.Fatalf("after %q, an earlier snapshot changed", history)
					}
					earlier, earlierExpected = got, snapshotFromScratch(r)
					history = history[:0]
				}
			})
		}
	}
}

// describeSnapshot renders a snapshot for a failure message.
func describeSnapshot(s *Snapshot) string {
	out := fmt.Sprintf("namespaces %v\n", s.Namespaces)
	for _, svc := range s.Services {
		out += fmt.Sprintf("  service %s (%s)", svc.Hostname, svc.Key)
		for _, port := range svc.Ports {
			out += fmt.Sprintf(" %d: %s;", port.Number, endpointList(s, svc, port.Number))
		}
		out += "\n"
	}
	for _, w := range s.Workloads {
		out += fmt.Sprintf("  workload %s/%s %s:", w.Namespace, w.Name, w.Address)
		for _, ws := range w.Services {
			out += fmt.Sprintf(" %s%v", ws.Service.Hostname, ws.Ports)
		}
		out += "\n"
	}
	return out
}
