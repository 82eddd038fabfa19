package scope

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"sync"

	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// DefaultRootNamespace is Istio's root configuration namespace when the mesh
// config names none.
const DefaultRootNamespace = "istio-system"

// meshGateway is the reserved gateway name that binds a VirtualService to
// sidecars.
const meshGateway = "mesh"

// Input is one push snapshot's configuration.
type Input struct {
	// Resources are all objects of the snapshot, already filtered by
	// discoverySelectors; the index reads Services, ServiceEntries,
	// WorkloadEntries, VirtualServices, DestinationRules, Gateways and Sidecars
	// and ignores the rest.
	Resources []*config.Resource
	// Mesh supplies rootNamespace, outboundTrafficPolicy and the default
	// exportTo of each kind; nil means Istio's defaults.
	Mesh *meshconfig.MeshConfig
	// DomainSuffix is the cluster domain; empty means cluster.local.
	DomainSuffix string
	// FilterGatewayClusterConfig is Istio's PILOT_FILTER_GATEWAY_CLUSTER_CONFIG:
	// gateways import only the destinations of their VirtualServices instead of
	// every service exported to their namespace. Default false, as in Istio.
	FilterGatewayClusterConfig bool
}

// Index resolves proxies to SidecarScopes for one push snapshot. Build it once
// per snapshot with NewIndex; For is safe for concurrent use, and each scope is
// computed once, on first use, then shared by every proxy it applies to.
type Index struct {
	rootNamespace string
	domainSuffix  string
	meshPolicy    networking.OutboundTrafficPolicy_Mode
	filterGateway bool

	services       []*Service // oldest first
	servicesByHost map[string][]*Service
	// servicesIn are each namespace's services, oldest first, and
	// servicePosition each service's place in services: a Sidecar that
	// imports named namespaces looks at theirs only, not at every service
	// of the mesh (which made building a namespace's scope cost as much as
	// the mesh is large).
	servicesIn      map[string][]*Service
	servicePosition map[*Service]int
	// hostShared says whether any hostname has several services (in
	// several namespaces, or a Service and a ServiceEntry): only then does
	// a scope have to choose one per hostname.
	hostShared bool
	// serviceNamespaces is how many namespaces have services: the most a
	// scope's per-namespace maps can hold, to size them once.
	serviceNamespaces int
	virtualServices   []*vsEntry
	destRules         map[string][]*drEntry // by namespace, oldest first
	gateways          []*config.Resource
	workloadLabels    map[config.Key]map[string]string // WorkloadEntries

	// sidecars holds each namespace's Sidecars in the order they are tried:
	// those with a selector, then those without, each oldest first.
	sidecars    map[string][]*config.Resource
	rootSidecar *config.Resource

	mu     sync.Mutex
	scopes map[string]*scopeSlot
}

type scopeSlot struct {
	once  sync.Once
	scope *SidecarScope
}

type vsEntry struct {
	res      *config.Resource
	key      config.Key
	hosts    []string        // resolved to FQDNs
	gateways map[string]bool // "ns/name", and "mesh"
	exportTo ExportTo        // mesh default applied
	dests    []string        // destination hosts, resolved
}

type drEntry struct {
	res      *config.Resource
	host     string // resolved
	exportTo ExportTo
}

// NewIndex indexes a snapshot. It never fails: objects whose spec is not the
// expected type are skipped, as they would have been rejected on decoding.
func NewIndex(in Input) *Index {
	ix := &Index{
		rootNamespace:  cmp.Or(in.Mesh.GetRootNamespace(), DefaultRootNamespace),
		domainSuffix:   cmp.Or(in.DomainSuffix, DefaultDomainSuffix),
		meshPolicy:     networking.OutboundTrafficPolicy_ALLOW_ANY,
		filterGateway:  in.FilterGatewayClusterConfig,
		servicesByHost: map[string][]*Service{},
		destRules:      map[string][]*drEntry{},
		workloadLabels: map[config.Key]map[string]string{},
		sidecars:       map[string][]*config.Resource{},
		scopes:         map[string]*scopeSlot{},
	}
	if p := in.Mesh.GetOutboundTrafficPolicy(); p != nil {
		// The two enums share numbering: REGISTRY_ONLY = 0, ALLOW_ANY = 1.
		ix.meshPolicy = networking.OutboundTrafficPolicy_Mode(p.GetMode())
	}
	svcDefault := ParseExportTo(in.Mesh.GetDefaultServiceExportTo())
	vsDefault := ParseExportTo(in.Mesh.GetDefaultVirtualServiceExportTo())
	drDefault := ParseExportTo(in.Mesh.GetDefaultDestinationRuleExportTo())

	ix.services = ServicesFrom(in.Resources, ix.domainSuffix)
	ix.servicesIn = map[string][]*Service{}
	ix.servicePosition = make(map[*Service]int, len(ix.services))
	for i, s := range ix.services {
		s.ExportTo = s.ExportTo.orDefault(svcDefault)
		ix.servicesByHost[s.Hostname] = append(ix.servicesByHost[s.Hostname], s)
		ix.hostShared = ix.hostShared || len(ix.servicesByHost[s.Hostname]) > 1
		ix.servicesIn[s.Namespace] = append(ix.servicesIn[s.Namespace], s)
		ix.servicePosition[s] = i
	}
	ix.serviceNamespaces = len(ix.servicesIn)

	rs := slices.Clone(in.Resources)
	slices.SortStableFunc(rs, compareResources)
	var sidecars []*config.Resource
	for _, r := range rs {
		if r == nil {
			continue
		}
		switch spec := r.Spec.(type) {
		case *networking.VirtualService:
			if r.Kind == config.KindVirtualService && spec != nil {
				ix.virtualServices = append(ix.virtualServices, ix.newVSEntry(r, spec, vsDefault))
			}
		case *networking.DestinationRule:
			if r.Kind == config.KindDestinationRule && spec != nil {
				ns := r.Meta.Namespace
				ix.destRules[ns] = append(ix.destRules[ns], &drEntry{
					res:      r,
					host:     resolveHost(spec.GetHost(), ns, ix.domainSuffix),
					exportTo: ParseExportTo(spec.GetExportTo()).orDefault(drDefault),
				})
			}
		case *networking.Gateway:
			if r.Kind == config.KindGateway && spec != nil {
				ix.gateways = append(ix.gateways, r)
			}
		case *networking.WorkloadEntry:
			if r.Kind == config.KindWorkloadEntry && spec != nil {
				ix.workloadLabels[r.Key()] = mergeLabels(r.Meta.Labels, spec.GetLabels())
			}
		case *networking.Sidecar:
			if r.Kind == config.KindSidecar && spec != nil {
				sidecars = append(sidecars, r)
			}
		}
	}
	ix.indexSidecars(sidecars)
	return ix
}

// indexSidecars orders each namespace's Sidecars the way istiod tries them
// and picks the mesh-wide default: the oldest selector-less Sidecar in the
// root namespace. sidecars must be sorted oldest first.
func (ix *Index) indexSidecars(sidecars []*config.Resource) {
	for _, withSelector := range []bool{true, false} {
		for _, r := range sidecars {
			if (sidecarSpec(r).GetWorkloadSelector() != nil) != withSelector {
				continue
			}
			ns := r.Meta.Namespace
			ix.sidecars[ns] = append(ix.sidecars[ns], r)
			if !withSelector && ns == ix.rootNamespace && ix.rootSidecar == nil {
				ix.rootSidecar = r
			}
		}
	}
}

func (ix *Index) newVSEntry(r *config.Resource, spec *networking.VirtualService, def ExportTo) *vsEntry {
	ns := r.Meta.Namespace
	e := &vsEntry{
		res:      r,
		key:      r.Key(),
		gateways: map[string]bool{},
		exportTo: ParseExportTo(spec.GetExportTo()).orDefault(def),
	}
	for _, h := range spec.GetHosts() {
		e.hosts = append(e.hosts, resolveHost(h, ns, ix.domainSuffix))
	}
	if len(spec.GetGateways()) == 0 {
		e.gateways[meshGateway] = true
	}
	for _, g := range spec.GetGateways() {
		switch {
		case g == meshGateway:
			e.gateways[meshGateway] = true
		case strings.Contains(g, "/"):
			e.gateways[g] = true
		default:
			e.gateways[ns+"/"+g] = true
		}
	}
	seen := map[string]bool{}
	add := func(d *networking.Destination) {
		if h := resolveHost(d.GetHost(), ns, ix.domainSuffix); h != "" && !seen[h] {
			seen[h] = true
			e.dests = append(e.dests, h)
		}
	}
	for _, h := range spec.GetHttp() {
		for _, d := range h.GetRoute() {
			add(d.GetDestination())
		}
		add(h.GetMirror())
		for _, m := range h.GetMirrors() {
			add(m.GetDestination())
		}
	}
	for _, t := range spec.GetTcp() {
		for _, d := range t.GetRoute() {
			add(d.GetDestination())
		}
	}
	for _, t := range spec.GetTls() {
		for _, d := range t.GetRoute() {
			add(d.GetDestination())
		}
	}
	return e
}

// For returns the scope of proxy p: for a sidecar, the Sidecar that applies to
// it (see selectSidecar) or the default scope of its namespace; for a gateway,
// a scope built from the Gateways that select it. Proxies resolved the same
// way get the same pointer. A nil proxy gets nil, which depends on everything.
func (ix *Index) For(p *model.Proxy) *SidecarScope {
	if p == nil {
		return nil
	}
	if p.Type == model.Router {
		gws := ix.gatewaysFor(p)
		id := gatewayScopeID(p.Namespace, gws)
		return ix.scope(id, func() *SidecarScope { return ix.buildGatewayScope(id, p.Namespace, gws) })
	}
	sc := ix.selectSidecar(p.Namespace, p.Labels)
	id := sidecarScopeID(p.Namespace, sc)
	return ix.scope(id, func() *SidecarScope { return ix.buildSidecarScope(id, p.Namespace, sc) })
}

// selectSidecar applies istiod's order: a Sidecar in the namespace whose
// selector matches (oldest first), else the namespace's selector-less one,
// else the root namespace's selector-less one; nil means none applies. A
// selector with no labels matches every workload, as in istiod.
func (ix *Index) selectSidecar(ns string, labels map[string]string) *config.Resource {
	for _, r := range ix.sidecars[ns] {
		sel := sidecarSpec(r).GetWorkloadSelector()
		if sel == nil || labelsSubset(sel.GetLabels(), labels) {
			return r
		}
	}
	return ix.rootSidecar
}

// gatewaysFor lists the Gateways, in any namespace, whose selector matches the
// proxy's labels (istiod's default, PILOT_SCOPE_GATEWAY_TO_NAMESPACE=false).
func (ix *Index) gatewaysFor(p *model.Proxy) []*config.Resource {
	var out []*config.Resource
	for _, g := range ix.gateways {
		if labelsSubset(g.Spec.(*networking.Gateway).GetSelector(), p.Labels) {
			out = append(out, g)
		}
	}
	return out
}

// scope returns the scope cached under id, building it once.
func (ix *Index) scope(id string, build func() *SidecarScope) *SidecarScope {
	ix.mu.Lock()
	slot, ok := ix.scopes[id]
	if !ok {
		slot = &scopeSlot{}
		ix.scopes[id] = slot
	}
	ix.mu.Unlock()
	slot.once.Do(func() { slot.scope = build() })
	return slot.scope
}

// RootNamespace is the root configuration namespace the index was built with.
func (ix *Index) RootNamespace() string { return ix.rootNamespace }

// Services lists every service of the snapshot, oldest first.
func (ix *Index) Services() []*Service { return ix.services }

func sidecarScopeID(ns string, sidecar *config.Resource) string {
	if sidecar == nil {
		return "default@" + ns
	}
	return "sidecar/" + sidecar.Meta.Namespace + "/" + sidecar.Meta.Name + "@" + ns
}

func gatewayScopeID(ns string, gws []*config.Resource) string {
	names := make([]string, len(gws))
	for i, g := range gws {
		names[i] = g.Meta.Namespace + "/" + g.Meta.Name
	}
	sort.Strings(names)
	return "gateway@" + ns + "[" + strings.Join(names, ",") + "]"
}

func sidecarSpec(r *config.Resource) *networking.Sidecar {
	if r == nil {
		return nil
	}
	s, _ := r.Spec.(*networking.Sidecar)
	return s
}

// compareResources is istiod's order for "the oldest wins": creation time,
// then name, then namespace.
func compareResources(a, b *config.Resource) int {
	if a == nil || b == nil {
		return cmp.Compare(boolInt(a == nil), boolInt(b == nil))
	}
	if c := a.Meta.CreationTimestamp.Time.Compare(b.Meta.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Meta.Name, b.Meta.Name), strings.Compare(a.Meta.Namespace, b.Meta.Namespace))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeLabels returns a WorkloadEntry's labels: the spec's, over the
// metadata's.
func mergeLabels(meta, spec map[string]string) map[string]string {
	out := make(map[string]string, len(meta)+len(spec))
	for k, v := range meta {
		out[k] = v
	}
	for k, v := range spec {
		out[k] = v
	}
	return out
}
