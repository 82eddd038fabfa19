package config

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// validateVirtualService follows Istio's rules for hosts, gateways and
// routes. A VirtualService without hosts is a delegate, valid as long as it
// has no gateways, TCP or TLS routes.
func validateVirtualService(r *Resource, errs *fieldErrors) bool {
	vs, ok := r.Spec.(*networking.VirtualService)
	if !ok {
		return false
	}
	if len(vs.Hosts) == 0 {
		if len(vs.Gateways) > 0 {
			errs.add("spec.gateways", "must be empty in a delegate VirtualService (one without hosts)")
		}
		if len(vs.Tcp) > 0 || len(vs.Tls) > 0 {
			errs.add("spec.hosts", "required for tcp and tls routes")
		}
	}
	meshOnly := len(vs.Gateways) == 0
	for i, g := range vs.Gateways {
		checkGatewayName(errs, idx("spec.gateways", i), g)
		if g == "mesh" {
			meshOnly = true
		}
	}
	for i, h := range vs.Hosts {
		path := idx("spec.hosts", i)
		if isIP(h) {
			continue
		}
		if meshOnly && h == "*" {
			errs.add(path, "the wildcard \"*\" is not allowed for VirtualServices bound to the mesh")
			continue
		}
		checkHost(errs, path, h)
	}
	if len(vs.Http) == 0 && len(vs.Tcp) == 0 && len(vs.Tls) == 0 {
		errs.add("spec", "at least one of http, tcp or tls routes is required")
	}
	for i, h := range vs.Http {
		checkHTTPRoute(errs, idx("spec.http", i), h, len(vs.Hosts) == 0)
	}
	for i, t := range vs.Tcp {
		checkTCPRoute(errs, idx("spec.tcp", i), t)
	}
	for i, t := range vs.Tls {
		path := idx("spec.tls", i)
		if t == nil {
			errs.add(path, "must not be null")
			continue
		}
		if len(t.Match) == 0 {
			errs.add(path+".match", "required")
		}
		for j, m := range t.Match {
			if m == nil || len(m.SniHosts) == 0 {
				errs.add(idx(path+".match", j)+".sniHosts", "required")
			}
		}
		checkRouteDestinations(errs, path+".route", t.Route)
	}
	checkExportTo(errs, "spec.exportTo", r.Meta.Namespace, vs.ExportTo, false)
	return true
}

// checkGatewayName: "mesh", "namespace/name" or a legacy "name[.namespace...]".
func checkGatewayName(errs *fieldErrors, path, g string) {
	if g == "mesh" {
		return
	}
	ns, name, found := strings.Cut(g, "/")
	if !found {
		if p := hostProblem(g, false); p != "" {
			errs.add(path, "invalid gateway %q: want namespace/name", g)
		}
		return
	}
	if !isKubeLabel(ns) || !isKubeLabel(name) {
		errs.add(path, "invalid gateway %q: want namespace/name", g)
	}
}

func checkHTTPRoute(errs *fieldErrors, path string, h *networking.HTTPRoute, delegate bool) {
	if h == nil {
		errs.add(path, "must not be null")
		return
	}
	switch {
	case h.Delegate != nil:
		if delegate {
			errs.add(path+".delegate", "not allowed in a delegate VirtualService")
		}
		if len(h.Route) > 0 || h.Redirect != nil {
			errs.add(path, "a route with delegate cannot also have route or redirect")
		}
	case h.Redirect != nil:
		if len(h.Route) > 0 || h.Fault != nil || h.Rewrite != nil || h.DirectResponse != nil {
			errs.add(path+".redirect", "cannot be combined with route, fault, rewrite or directResponse")
		}
	case h.DirectResponse != nil:
		if len(h.Route) > 0 || h.Fault != nil || h.Rewrite != nil {
			errs.add(path+".directResponse", "cannot be combined with route, fault or rewrite")
		}
	case len(h.Route) == 0:
		errs.add(path+".route", "required (or redirect, directResponse or delegate)")
	}
	if h.Mirror != nil && len(h.Mirrors) > 0 {
		errs.add(path+".mirror", "cannot be combined with mirrors")
	}
	for i, m := range h.Match {
		checkHTTPMatch(errs, idx(path+".match", i), m)
	}
	checkHTTPDestinations(errs, path+".route", h.Route)
	checkDestination(errs, path+".mirror", h.Mirror)
	for i, m := range h.Mirrors {
		p := idx(path+".mirrors", i)
		if m == nil || m.Destination == nil {
			errs.add(p+".destination", "required")
			continue
		}
		checkDestination(errs, p+".destination", m.Destination)
		if m.Percentage != nil {
			checkPercent(errs, p+".percentage.value", m.Percentage.Value)
		}
	}
	if h.MirrorPercentage != nil {
		checkPercent(errs, path+".mirrorPercentage.value", h.MirrorPercentage.Value)
	}
	//lint:ignore SA1019 deprecated but still accepted by Istio, so still checked
	if h.MirrorPercent != nil && h.MirrorPercent.Value > 100 {
		errs.add(path+".mirrorPercent", "%d is more than 100", h.MirrorPercent.Value) //lint:ignore SA1019 as above
	}
	checkDuration(errs, path+".timeout", h.Timeout)
	checkRetries(errs, path+".retries", h.Retries)
	checkFault(errs, path+".fault", h.Fault)
	checkRewrite(errs, path+".rewrite", h.Rewrite)
	checkRedirect(errs, path+".redirect", h.Redirect, h.Match)
	if d := h.DirectResponse; d != nil && (d.Status < 200 || d.Status > 599) {
		errs.add(path+".directResponse.status", "%d is not in the range 200-599", d.Status)
	}
	if c := h.CorsPolicy; c != nil {
		for i, o := range c.AllowOrigins {
			checkStringMatch(errs, idx(path+".corsPolicy.allowOrigins", i), o, false)
		}
		checkDuration(errs, path+".corsPolicy.maxAge", c.MaxAge)
	}
}

var headerName = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~A-Za-z0-9]+$")

func checkHTTPMatch(errs *fieldErrors, path string, m *networking.HTTPMatchRequest) {
	if m == nil {
		return
	}
	checkStringMatch(errs, path+".uri", m.Uri, false)
	checkStringMatch(errs, path+".scheme", m.Scheme, false)
	checkStringMatch(errs, path+".method", m.Method, false)
	checkStringMatch(errs, path+".authority", m.Authority, false)
	for name, sm := range sortedMap(m.Headers) {
		p := key(path+".headers", name)
		if !headerName.MatchString(name) && !strings.HasPrefix(name, ":") && !strings.HasPrefix(name, "@request.auth.claims") {
			errs.add(p, "invalid header name %q", name)
		}
		// An empty match means "the header is present".
		checkStringMatch(errs, p, sm, true)
	}
	for name, sm := range sortedMap(m.WithoutHeaders) {
		checkStringMatch(errs, key(path+".withoutHeaders", name), sm, true)
	}
	for name, sm := range sortedMap(m.QueryParams) {
		checkStringMatch(errs, key(path+".queryParams", name), sm, true)
	}
	if m.Port != 0 {
		checkPort(errs, path+".port", int64(m.Port))
	}
	checkLabels(errs, path+".sourceLabels", m.SourceLabels)
	if m.SourceNamespace != "" && !isKubeLabel(m.SourceNamespace) {
		errs.add(path+".sourceNamespace", "%q is not a namespace name", m.SourceNamespace)
	}
	for i, g := range m.Gateways {
		checkGatewayName(errs, idx(path+".gateways", i), g)
	}
}

// checkStringMatch: exact, prefix and regex are a oneof, so at most one is
// set by construction; an empty prefix or regex is an error, and regexes
// must compile as RE2 (Go's regexp is RE2, like Envoy's).
func checkStringMatch(errs *fieldErrors, path string, sm *networking.StringMatch, allowEmpty bool) {
	if sm == nil {
		return
	}
	switch t := sm.MatchType.(type) {
	case nil:
		if !allowEmpty {
			errs.add(path, "one of exact, prefix or regex is required")
		}
	case *networking.StringMatch_Prefix:
		if t.Prefix == "" {
			errs.add(path+".prefix", "must not be empty")
		}
	case *networking.StringMatch_Regex:
		checkRegex(errs, path+".regex", t.Regex)
	}
}

func checkRegex(errs *fieldErrors, path, re string) {
	switch {
	case re == "":
		errs.add(path, "must not be empty")
	case len(re) > 1024:
		errs.add(path, "longer than 1024 characters")
	default:
		if _, err := regexp.Compile(re); err != nil {
			errs.add(path, "invalid RE2 regex: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
}

// checkHTTPDestinations: Istio requires each weight >= 0 and, with several
// destinations, a positive total; weights that do not sum to 100 are
// normalized by Istio, so they are accepted here too.
func checkHTTPDestinations(errs *fieldErrors, path string, ds []*networking.HTTPRouteDestination) {
	var total int64
	for i, d := range ds {
		p := idx(path, i)
		if d == nil {
			errs.add(p, "must not be null")
			continue
		}
		if d.Destination == nil {
			errs.add(p+".destination", "required")
		}
		checkDestination(errs, p+".destination", d.Destination)
		if d.Weight < 0 {
			errs.add(p+".weight", "%d is negative", d.Weight)
		}
		total += int64(d.Weight)
	}
	if len(ds) > 1 && total <= 0 {
		errs.add(path, "the weights of several destinations must not all be 0")
	}
}

func checkRouteDestinations(errs *fieldErrors, path string, ds []*networking.RouteDestination) {
	var total int64
	for i, d := range ds {
		p := idx(path, i)
		if d == nil {
			errs.add(p, "must not be null")
			continue
		}
		if d.Destination == nil {
			errs.add(p+".destination", "required")
		}
		checkDestination(errs, p+".destination", d.Destination)
		if d.Weight < 0 {
			errs.add(p+".weight", "%d is negative", d.Weight)
		}
		total += int64(d.Weight)
	}
	if len(ds) > 1 && total <= 0 {
		errs.add(path, "the weights of several destinations must not all be 0")
	}
}

func checkDestination(errs *fieldErrors, path string, d *networking.Destination) {
	if d == nil {
		return
	}
	switch d.Host {
	case "":
		errs.add(path+".host", "required")
	case "*":
		errs.add(path+".host", "the wildcard \"*\" is not a destination")
	default:
		checkHost(errs, path+".host", d.Host)
	}
	if d.Subset != "" && !isKubeLabel(d.Subset) {
		errs.add(path+".subset", "%q is not a valid subset name (a DNS-1123 label)", d.Subset)
	}
	if d.Port != nil {
		checkPort(errs, path+".port.number", int64(d.Port.Number))
	}
}

func checkTCPRoute(errs *fieldErrors, path string, t *networking.TCPRoute) {
	if t == nil {
		errs.add(path, "must not be null")
		return
	}
	for i, m := range t.Match {
		p := idx(path+".match", i)
		if m == nil {
			errs.add(p, "must not be null")
			continue
		}
		for j, s := range m.DestinationSubnets {
			checkIPOrCIDR(errs, idx(p+".destinationSubnets", j), s)
		}
		if m.Port != 0 {
			checkPort(errs, p+".port", int64(m.Port))
		}
		checkLabels(errs, p+".sourceLabels", m.SourceLabels)
		for j, g := range m.Gateways {
			checkGatewayName(errs, idx(p+".gateways", j), g)
		}
	}
	if len(t.Route) == 0 {
		errs.add(path+".route", "required")
	}
	checkRouteDestinations(errs, path+".route", t.Route)
}

var retryOnPolicies = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true,
	"connect-failure": true, "retriable-4xx": true, "refused-stream": true,
	"retriable-status-codes": true, "retriable-headers": true, "envoy-ratelimited": true,
	"http3-post-connect-failure": true, "cancelled": true, "deadline-exceeded": true,
	"internal": true, "resource-exhausted": true, "unavailable": true,
}

func checkRetries(errs *fieldErrors, path string, r *networking.HTTPRetry) {
	if r == nil {
		return
	}
	if r.Attempts < 0 {
		errs.add(path+".attempts", "%d is negative", r.Attempts)
	}
	if r.Attempts == 0 && (r.PerTryTimeout != nil || r.RetryOn != "" || r.RetryRemoteLocalities != nil) {
		errs.add(path, "retry settings given with attempts 0 (retries disabled)")
	}
	checkDuration(errs, path+".perTryTimeout", r.PerTryTimeout)
	checkDuration(errs, path+".backoff", r.Backoff)
	if r.RetryOn != "" {
		for _, p := range strings.Split(r.RetryOn, ",") {
			code, err := strconv.Atoi(p)
			if !retryOnPolicies[p] && (err != nil || http.StatusText(code) == "") {
				errs.add(path+".retryOn", "%q is not a retry policy or an HTTP status code", p)
			}
		}
	}
}

func checkFault(errs *fieldErrors, path string, f *networking.HTTPFaultInjection) {
	if f == nil {
		return
	}
	if f.Abort == nil && f.Delay == nil {
		errs.add(path, "one of abort or delay is required")
	}
	if d := f.Delay; d != nil {
		if d.Percentage != nil {
			checkPercent(errs, path+".delay.percentage.value", d.Percentage.Value)
		}
		switch t := d.HttpDelayType.(type) {
		case *networking.HTTPFaultInjection_Delay_FixedDelay:
			checkDuration(errs, path+".delay.fixedDelay", t.FixedDelay)
		case *networking.HTTPFaultInjection_Delay_ExponentialDelay:
			errs.add(path+".delay.exponentialDelay", "not supported")
		}
	}
	if a := f.Abort; a != nil {
		if a.Percentage != nil {
			checkPercent(errs, path+".abort.percentage.value", a.Percentage.Value)
		}
		switch t := a.ErrorType.(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			if t.HttpStatus < 200 || t.HttpStatus > 599 {
				errs.add(path+".abort.httpStatus", "%d is not in the range 200-599", t.HttpStatus)
			}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			if !grpcStatuses[t.GrpcStatus] {
				errs.add(path+".abort.grpcStatus", "%q is not a gRPC status name such as UNAVAILABLE", t.GrpcStatus)
			}
		case *networking.HTTPFaultInjection_Abort_Http2Error:
			errs.add(path+".abort.http2Error", "not supported")
		}
	}
}

var grpcStatuses = map[string]bool{
	"OK": true, "CANCELLED": true, "UNKNOWN": true, "INVALID_ARGUMENT": true, "DEADLINE_EXCEEDED": true,
	"NOT_FOUND": true, "ALREADY_EXISTS": true, "PERMISSION_DENIED": true, "RESOURCE_EXHAUSTED": true,
	"FAILED_PRECONDITION": true, "ABORTED": true, "OUT_OF_RANGE": true, "UNIMPLEMENTED": true,
	"INTERNAL": true, "UNAVAILABLE": true, "DATA_LOSS": true, "UNAUTHENTICATED": true,
}

func checkRewrite(errs *fieldErrors, path string, rw *networking.HTTPRewrite) {
	if rw == nil {
		return
	}
	switch {
	case rw.Uri != "" && rw.UriRegexRewrite != nil:
		errs.add(path, "only one of uri and uriRegexRewrite may be set")
	case rw.Uri == "" && rw.UriRegexRewrite == nil && rw.Authority == "":
		errs.add(path, "one of uri, uriRegexRewrite or authority is required")
	}
	if re := rw.UriRegexRewrite; re != nil {
		if re.Rewrite == "" {
			errs.add(path+".uriRegexRewrite.rewrite", "required")
		}
		checkRegex(errs, path+".uriRegexRewrite.match", re.Match)
	}
}

func checkRedirect(errs *fieldErrors, path string, rd *networking.HTTPRedirect, matches []*networking.HTTPMatchRequest) {
	if rd == nil {
		return
	}
	if rd.Uri != "" && rd.PrefixRewrite != "" {
		errs.add(path, "only one of uri and prefixRewrite may be set")
	}
	if rd.PrefixRewrite != "" {
		for _, m := range matches {
			if _, ok := m.GetUri().GetMatchType().(*networking.StringMatch_Prefix); m.GetUri() != nil && !ok {
				errs.add(path+".prefixRewrite", "needs every uri match to be a prefix match")
				break
			}
		}
	}
	if rd.Uri == "" && rd.PrefixRewrite == "" && rd.Authority == "" && rd.RedirectPort == nil && rd.Scheme == "" {
		errs.add(path, "one of uri, prefixRewrite, authority, port or scheme is required")
	}
	if rd.RedirectCode != 0 && (rd.RedirectCode < 300 || rd.RedirectCode > 399) {
		errs.add(path+".redirectCode", "%d is not a 3xx code", rd.RedirectCode)
	}
	if rd.Scheme != "" && rd.Scheme != "http" && rd.Scheme != "https" {
		errs.add(path+".scheme", "%q: want http or https", rd.Scheme)
	}
	if p := rd.GetPort(); p != 0 {
		checkPort(errs, path+".port", int64(p))
	}
}
