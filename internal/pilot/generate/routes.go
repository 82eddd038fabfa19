package generate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// FaultFilter is the HTTP filter that VirtualService fault injection configures
// per route; the HTTP connection manager must list it before the router.
const FaultFilter = "envoy.filters.http.fault"

// Istio's default retry policy for mesh routes without one of their own.
const (
	defaultRetryOn       = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
	defaultRetryAttempts = 2
)

// BoundVirtualService is a VirtualService with the namespace it lives in, which
// short host names in it are relative to.
type BoundVirtualService struct {
	Namespace string
	Spec      *networking.VirtualService
}

// RouteInput is what an outbound route configuration for one port is made of.
type RouteInput struct {
	Port            uint32
	Services        []*model.Service // the imported services with an HTTP port Port
	VirtualServices []BoundVirtualService
	ProxyNamespace  string // short names ("reviews") resolve for proxies in the same namespace
	DomainSuffix    string // "cluster.local"
	RegistryOnly    bool   // outboundTrafficPolicy REGISTRY_ONLY: unknown hosts get 502
	// VirtualHosts, when set, caches the virtual hosts: it returns the one
	// cached under key, calling build on first use. A virtual host depends
	// on nothing but its key (and DomainSuffix, which the cache's owner
	// keeps fixed), so proxies of different namespaces share most of them;
	// the host returned is shared and never modified.
	VirtualHosts func(key VirtualHostKey, build func() (*routev3.VirtualHost, error)) (*routev3.VirtualHost, error)
}

// VirtualHostKey is what one service's outbound virtual host is made of.
type VirtualHostKey struct {
	Service *model.Service
	Port    uint32
	// Local says the proxy is in the service's namespace, where its short
	// name resolves too.
	Local bool
	// VirtualService is the one routing the host, as given (nil: none).
	VirtualService *networking.VirtualService
}

// OutboundRouteConfig is the RouteConfiguration named after the port, as Istio
// names it: one virtual host per service, routed by its VirtualService if it has
// one, plus a catch-all for other hosts (passthrough, or blocked).
func OutboundRouteConfig(in RouteInput) (*routev3.RouteConfiguration, error) {
	rc := &routev3.RouteConfiguration{Name: strconv.FormatUint(uint64(in.Port), 10), ValidateClusters: wrapperspb.Bool(false)}
	byHost := virtualServicesByHost(in.VirtualServices, in.DomainSuffix)
	for _, svc := range in.Services {
		bvs, routed := byHost[svc.Hostname]
		build := func() (*routev3.VirtualHost, error) { return virtualHost(in, rc.Name, svc, bvs, routed) }
		var vh *routev3.VirtualHost
		var err error
		if in.VirtualHosts != nil {
			vh, err = in.VirtualHosts(VirtualHostKey{Service: svc, Port: in.Port, Local: svc.Namespace == in.ProxyNamespace, VirtualService: bvs.Spec}, build)
		} else {
			vh, err = build()
		}
		if err != nil {
			return nil, err
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	rc.VirtualHosts = append(rc.VirtualHosts, catchAll(in.RegistryOnly))
	return rc, nil
}

// virtualHost is one service's virtual host on the route configuration
// named routeName, routed by bvs if routed.
func virtualHost(in RouteInput, routeName string, svc *model.Service, bvs BoundVirtualService, routed bool) (*routev3.VirtualHost, error) {
	vh := &routev3.VirtualHost{
		Name:    svc.Hostname + ":" + routeName,
		Domains: domains(svc, in.Port, in.ProxyNamespace, in.DomainSuffix),
	}
	if routed && len(bvs.Spec.GetHttp()) > 0 {
		routes, err := httpRoutes(forMesh(bvs), svc, in)
		if err != nil {
			return nil, fmt.Errorf("VirtualService for %s: %w", svc.Hostname, err)
		}
		vh.Routes = routes
	}
	if len(vh.Routes) == 0 { // no VirtualService, or none of its routes is for sidecars
		vh.Routes = []*routev3.Route{defaultRoute(ClusterName(outbound, in.Port, "", svc.Hostname))}
	}
	return vh, nil
}

// forMesh narrows a VirtualService's http routes to sidecars (the "mesh"
// gateway): matches that name only other gateways are dropped, and routes left
// without a match with them (as forGateway does for a gateway).
func forMesh(vs BoundVirtualService) BoundVirtualService {
	forSidecars := func(m *networking.HTTPMatchRequest) bool {
		gws := m.GetGateways()
		return len(gws) == 0 || slices.Contains(gws, "mesh")
	}
	narrow := false
	for _, hr := range vs.Spec.GetHttp() {
		if !allOf(hr.GetMatch(), forSidecars) {
			narrow = true
		}
	}
	if !narrow {
		return vs // the common case: nothing to copy
	}
	spec := proto.Clone(vs.Spec).(*networking.VirtualService)
	var kept []*networking.HTTPRoute
	for _, hr := range spec.GetHttp() {
		if len(hr.GetMatch()) > 0 {
			hr.Match = slices.DeleteFunc(hr.Match, func(m *networking.HTTPMatchRequest) bool { return !forSidecars(m) })
			if len(hr.Match) == 0 {
				continue
			}
		}
		kept = append(kept, hr)
	}
	spec.Http = kept
	return BoundVirtualService{Namespace: vs.Namespace, Spec: spec}
}

func allOf[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

// virtualServicesByHost maps each fully qualified host to the first
// VirtualService that names it (for sidecars, the oldest wins; the caller passes
// them oldest first).
func virtualServicesByHost(vss []BoundVirtualService, suffix string) map[string]BoundVirtualService {
	out := map[string]BoundVirtualService{}
	for _, v := range vss {
		for _, h := range v.Spec.GetHosts() {
			fq := qualify(h, v.Namespace, suffix)
			if _, seen := out[fq]; !seen {
				out[fq] = v
			}
		}
	}
	return out
}

// qualify turns a short host name into a fully qualified one, relative to a
// namespace: "reviews" -> reviews.NS.svc.SUFFIX. Names with a dot, and
// wildcards, are taken as they are.
func qualify(host, namespace, suffix string) string {
	if strings.Contains(host, ".") || strings.HasPrefix(host, "*") {
		return host
	}
	return host + "." + namespace + ".svc." + suffix
}

// domains are the names a request for the service may carry in its Host header.
func domains(svc *model.Service, port uint32, proxyNamespace, suffix string) []string {
	p := ":" + strconv.FormatUint(uint64(port), 10)
	names := []string{svc.Hostname}
	if kube := "." + svc.Namespace + ".svc." + suffix; strings.HasSuffix(svc.Hostname, kube) {
		short := strings.TrimSuffix(svc.Hostname, kube)
		names = append(names, short+"."+svc.Namespace, short+"."+svc.Namespace+".svc")
		if proxyNamespace == svc.Namespace {
			names = append(names, short)
		}
	}
	names = append(names, svc.Addresses...)
	out := make([]string, 0, 2*len(names))
	for _, n := range names {
		out = append(out, n, n+p)
	}
	return out
}

func defaultRoute(cluster string) *routev3.Route {
	return &routev3.Route{
		Name:  "default",
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(0), // Istio disables Envoy's 15 s default
			RetryPolicy:      defaultRetryPolicy(),
		}},
	}
}

func defaultRetryPolicy() *routev3.RetryPolicy {
	return &routev3.RetryPolicy{
		RetryOn:              defaultRetryOn,
		NumRetries:           wrapperspb.UInt32(defaultRetryAttempts),
		RetriableStatusCodes: []uint32{503},
	}
}

// catchAll is the virtual host for hosts the registry does not know.
func catchAll(registryOnly bool) *routev3.VirtualHost {
	if registryOnly {
		return &routev3.VirtualHost{Name: "block_all", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Name:   "block_all",
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 502}},
		}}}
	}
	return &routev3.VirtualHost{Name: "allow_any", Domains: []string{"*"}, Routes: []*routev3.Route{{
		Name:  "allow_any",
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: PassthroughCluster},
			Timeout:          durationpb.New(0),
		}},
	}}}
}

// httpRoutes turns a VirtualService's http routes into Envoy routes, in order:
// one per match (or one catch-all when a route has no match).
func httpRoutes(bvs BoundVirtualService, svc *model.Service, in RouteInput) ([]*routev3.Route, error) {
	var out []*routev3.Route
	for i, hr := range bvs.Spec.GetHttp() {
		action, err := routeAction(hr, bvs.Namespace, in)
		if err != nil {
			return nil, fmt.Errorf("http[%d]: %w", i, err)
		}
		fault, err := faultConfig(hr.GetFault())
		if err != nil {
			return nil, fmt.Errorf("http[%d].fault: %w", i, err)
		}
		matches := hr.GetMatch()
		if len(matches) == 0 {
			matches = []*networking.HTTPMatchRequest{nil}
		}
		for _, m := range matches {
			if m.GetPort() != 0 && m.GetPort() != in.Port {
				continue
			}
			r := &routev3.Route{Name: hr.GetName(), Match: routeMatch(m), Action: action}
			if fault != nil {
				r.TypedPerFilterConfig = map[string]*anypb.Any{FaultFilter: fault}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func routeAction(hr *networking.HTTPRoute, namespace string, in RouteInput) (*routev3.Route_Route, error) {
	a := &routev3.RouteAction{Timeout: durationpb.New(0), RetryPolicy: defaultRetryPolicy()}
	if t := hr.GetTimeout(); t != nil {
		a.Timeout = durationpb.New(t.AsDuration())
	}
	if r := hr.GetRetries(); r != nil {
		a.RetryPolicy = retryPolicy(r)
	}
	if rw := hr.GetRewrite(); rw != nil {
		a.PrefixRewrite = rw.GetUri()
		if rw.GetAuthority() != "" {
			a.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: rw.GetAuthority()}
		}
	}
	dests := hr.GetRoute()
	switch len(dests) {
	case 0:
		return nil, fmt.Errorf("no route destination")
	case 1:
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: destinationCluster(dests[0].GetDestination(), namespace, in)}
	default:
		wc := &routev3.WeightedCluster{}
		for _, d := range dests {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{
				Name:   destinationCluster(d.GetDestination(), namespace, in),
				Weight: wrapperspb.UInt32(uint32(d.GetWeight())),
			})
		}
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	return &routev3.Route_Route{Route: a}, nil
}

// destinationCluster names the cluster a VirtualService destination goes to:
// its port, else the port being routed.
func destinationCluster(d *networking.Destination, namespace string, in RouteInput) string {
	port := d.GetPort().GetNumber()
	if port == 0 {
		port = in.Port
	}
	return ClusterName(outbound, port, d.GetSubset(), qualify(d.GetHost(), namespace, in.DomainSuffix))
}

func retryPolicy(r *networking.HTTPRetry) *routev3.RetryPolicy {
	if r.GetAttempts() <= 0 {
		return nil // attempts 0 turns retries off
	}
	p := &routev3.RetryPolicy{RetryOn: r.GetRetryOn(), NumRetries: wrapperspb.UInt32(uint32(r.GetAttempts()))}
	if p.RetryOn == "" {
		p.RetryOn = defaultRetryOn
		p.RetriableStatusCodes = []uint32{503}
	}
	if t := r.GetPerTryTimeout(); t != nil {
		p.PerTryTimeout = durationpb.New(t.AsDuration())
	}
	return p
}

// routeMatch turns one HTTPMatchRequest into an Envoy match; nil matches all.
func routeMatch(m *networking.HTTPMatchRequest) *routev3.RouteMatch {
	rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if m == nil {
		return rm
	}
	if u := m.GetUri(); u != nil {
		switch u.GetMatchType().(type) {
		case *networking.StringMatch_Exact:
			rm.PathSpecifier = &routev3.RouteMatch_Path{Path: u.GetExact()}
		case *networking.StringMatch_Prefix:
			rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: u.GetPrefix()}
		case *networking.StringMatch_Regex:
			rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: u.GetRegex()}}
		}
	}
	if m.GetIgnoreUriCase() {
		rm.CaseSensitive = wrapperspb.Bool(false)
	}
	names := make([]string, 0, len(m.GetHeaders()))
	for name := range m.GetHeaders() {
		names = append(names, name)
	}
	sortStrings(names) // map order would make the config differ from push to push
	for _, name := range names {
		rm.Headers = append(rm.Headers, headerMatcher(name, m.GetHeaders()[name]))
	}
	if meth := m.GetMethod(); meth != nil {
		rm.Headers = append(rm.Headers, headerMatcher(":method", meth))
	}
	return rm
}

func headerMatcher(name string, sm *networking.StringMatch) *routev3.HeaderMatcher {
	var pattern *matcherv3.StringMatcher
	switch sm.GetMatchType().(type) {
	case *networking.StringMatch_Prefix:
		pattern = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: sm.GetPrefix()}}
	case *networking.StringMatch_Regex:
		pattern = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: sm.GetRegex()}}}
	case *networking.StringMatch_Exact:
		pattern = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: sm.GetExact()}}
	default: // an empty match: the header must be present
		return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}
	}
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: pattern}}
}

// faultConfig is the per-route fault filter config of a VirtualService fault.
func faultConfig(f *networking.HTTPFaultInjection) (*anypb.Any, error) {
	if f == nil {
		return nil, nil
	}
	h := &faultv3.HTTPFault{}
	if d := f.GetDelay(); d != nil && d.GetFixedDelay() != nil {
		h.Delay = &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(d.GetFixedDelay().AsDuration())},
			//lint:ignore SA1019 configurations written for older Istio still use percent
			Percentage: percent(d.GetPercentage(), d.GetPercent()),
		}
	}
	if a := f.GetAbort(); a != nil && a.GetHttpStatus() != 0 {
		h.Abort = &faultv3.FaultAbort{
			ErrorType:  &faultv3.FaultAbort_HttpStatus{HttpStatus: uint32(a.GetHttpStatus())},
			Percentage: percent(a.GetPercentage(), 0),
		}
	}
	if h.Delay == nil && h.Abort == nil {
		return nil, nil
	}
	return anypb.New(h)
}

// percent is Istio's fault percentage in Envoy's form, in millionths so that
// fractions such as 0.1% survive. No percentage means all requests.
func percent(p *networking.Percent, legacy int32) *typev3.FractionalPercent {
	v := 100.0
	switch {
	case p != nil:
		v = p.GetValue()
	case legacy > 0:
		v = float64(legacy)
	}
	return &typev3.FractionalPercent{Numerator: uint32(v * 10000), Denominator: typev3.FractionalPercent_MILLION}
}
