package config

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks r the way Istio (or the Kubernetes API server, for core
// kinds) would before accepting it, so that whatever the control plane stores
// it can turn into Envoy config. Decode calls it for every object. Only
// errors are reported, not Istio's warnings. The error is a *ValidationError
// listing every problem found, each as "field.path: problem".
func Validate(r *Resource) error {
	var errs fieldErrors
	validateMeta(r, &errs)
	if r.Spec == nil {
		errs.add("spec", "required")
		return errs.err()
	}
	ok := true
	switch r.Kind {
	case KindNamespace:
		ok = isType[*namespaceSpec](r.Spec)
	case KindService:
		ok = validateService(r, &errs)
	case KindServiceEntry:
		ok = validateServiceEntry(r, &errs)
	case KindWorkloadEntry:
		ok = validateWorkloadEntry(r, &errs)
	case KindVirtualService:
		ok = validateVirtualService(r, &errs)
	case KindDestinationRule:
		ok = validateDestinationRule(r, &errs)
	case KindGateway:
		ok = validateGateway(r, &errs)
	case KindSidecar:
		ok = validateSidecar(r, &errs)
	case KindPeerAuthentication:
		ok = validatePeerAuthentication(r, &errs)
	case KindAuthorizationPolicy:
		ok = validateAuthorizationPolicy(r, &errs)
	case KindKubernetesGateway:
		ok = validateWaypointGateway(r, &errs)
	default:
		errs.add("kind", "%q is not supported", r.Kind)
	}
	if !ok {
		errs.add("spec", "has Go type %T, which is not the spec type of %s", r.Spec, r.Kind)
	}
	return errs.err()
}

func isType[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

func validateMeta(r *Resource, errs *fieldErrors) {
	m := &r.Meta
	switch {
	case m.Name == "":
		errs.add("metadata.name", "required")
	case r.Kind == KindService:
		// The API server requires Service names to be DNS-1035 labels.
		for _, msg := range validation.IsDNS1035Label(m.Name) {
			errs.add("metadata.name", "%q: %s", m.Name, msg)
		}
	case r.Kind == KindNamespace || r.Kind == KindGateway:
		// Namespaces by the API server's rule, Gateways by Istio's.
		for _, msg := range validation.IsDNS1123Label(m.Name) {
			errs.add("metadata.name", "%q: %s", m.Name, msg)
		}
	default:
		// Custom resources may be named by any DNS-1123 subdomain, and Istio
		// accepts names such as "reviews.v2".
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			errs.add("metadata.name", "%q: %s", m.Name, msg)
		}
	}
	if !r.Kind.ClusterScoped() {
		for _, msg := range validation.IsDNS1123Label(m.Namespace) {
			errs.add("metadata.namespace", "%q: %s", m.Namespace, msg)
		}
	}
	checkLabels(errs, "metadata.labels", m.Labels)
	for k := range sortedMap(m.Annotations) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs.add(key("metadata.annotations", k), "invalid key: %s", msg)
		}
	}
}

// checkLabels applies Kubernetes' rules for label keys and values.
func checkLabels(errs *fieldErrors, path string, labels map[string]string) {
	for k, v := range sortedMap(labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs.add(key(path, k), "invalid key: %s", msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs.add(key(path, k), "invalid value %q: %s", v, msg)
		}
	}
}

// checkSelector applies Istio's workload selector rules on top of the
// label rules: no empty keys and no wildcards.
func checkSelector(errs *fieldErrors, path string, labels map[string]string) {
	for k, v := range sortedMap(labels) {
		if strings.Contains(k, "*") || strings.Contains(v, "*") {
			errs.add(key(path, k), "wildcards are not supported in selectors")
		}
	}
	checkLabels(errs, path, labels)
}

// isKubeLabel is Kubernetes' DNS-1123 label test (lower case), used for
// namespace and subset names.
func isKubeLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

func validPort(n int64) bool { return n >= 1 && n <= 65535 }

func checkPort(errs *fieldErrors, path string, n int64) {
	if !validPort(n) {
		errs.add(path, "port %d is not in the range 1-65535", n)
	}
}

// istioProtocols are the port protocols Istio understands (case-insensitive);
// empty means "detect".
var istioProtocols = map[string]bool{
	"tcp": true, "udp": true, "grpc": true, "grpc-web": true, "http": true, "http_proxy": true,
	"http2": true, "https": true, "tls": true, "mongo": true, "redis": true, "mysql": true,
}

func checkProtocol(errs *fieldErrors, path, p string) {
	if p != "" && !istioProtocols[strings.ToLower(p)] {
		errs.add(path, "unsupported protocol %q; want HTTP, HTTPS, HTTP2, GRPC, GRPC-Web, TLS, TCP, UDP, Mongo, Redis or MySQL", p)
	}
}

func protocolIsHTTP(p string) bool {
	switch strings.ToLower(p) {
	case "http", "http2", "grpc", "grpc-web", "http_proxy":
		return true
	}
	return false
}

func protocolIsTLS(p string) bool {
	switch strings.ToLower(p) {
	case "https", "tls":
		return true
	}
	return false
}

// checkPortName: Istio requires port names to be DNS-1123 labels.
func checkPortName(errs *fieldErrors, path, name string) {
	if !isHostLabel(name) {
		errs.add(path, "invalid port name %q: want a DNS-1123 label", name)
	}
}

var hostLabel = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// isHostLabel is Istio's DNS-1123 label test for host names, which unlike
// Kubernetes' accepts upper case.
func isHostLabel(s string) bool { return len(s) <= 63 && hostLabel.MatchString(s) }

// hostProblem returns why h is not a valid host name, "" if it is. With
// wildcard, the first label may be "*" or start with "*" (as in
// "*.example.com" or "*"). A trailing dot is allowed.
func hostProblem(h string, wildcard bool) string {
	if h == "" {
		return "empty host name"
	}
	if len(h) > 255 {
		return "host name longer than 255 characters"
	}
	labels := strings.Split(h, ".")
	if last := labels[len(labels)-1]; last != "" {
		if _, err := strconv.Atoi(last); err == nil {
			return "top-level domain " + strconv.Quote(last) + " cannot be all numeric"
		}
	}
	for i, l := range labels {
		if i == len(labels)-1 && l == "" && i > 0 {
			break
		}
		if i == 0 && wildcard && (l == "*" || (strings.HasPrefix(l, "*") && isHostLabel(l[1:]))) {
			continue
		}
		if !isHostLabel(l) {
			return "invalid label " + strconv.Quote(l)
		}
	}
	return ""
}

// checkHost validates a host as Istio's ValidateWildcardDomain does.
func checkHost(errs *fieldErrors, path, h string) {
	if p := hostProblem(h, true); p != "" {
		errs.add(path, "invalid host %q: %s", h, p)
	}
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func checkIPOrCIDR(errs *fieldErrors, path, s string) {
	if strings.Contains(s, "/") {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs.add(path, "%q is not a valid CIDR block", s)
		}
		return
	}
	if !isIP(s) {
		errs.add(path, "%q is not a valid IP address", s)
	}
}

// checkDuration applies Istio's rule for durations: at least 1ms, in whole
// milliseconds, since Envoy's config is millisecond-based.
func checkDuration(errs *fieldErrors, path string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		errs.add(path, "invalid duration: %v", err)
		return
	}
	v := d.AsDuration()
	switch {
	case v < time.Millisecond:
		errs.add(path, "duration %s must be at least 1ms", v)
	case v%time.Millisecond != 0:
		errs.add(path, "duration %s must be a whole number of milliseconds", v)
	}
}

func checkPercent(errs *fieldErrors, path string, v float64) {
	// Written so that NaN fails too.
	if !(v >= 0 && v <= 100) || (v > 0 && v < 0.0001) {
		errs.add(path, "percentage %v must be 0 or in the range 0.0001-100", v)
	}
}

// checkExportTo applies Istio's exportTo rules: ".", "*" or a namespace name;
// "~" (nobody) only for ServiceEntries; no duplicates; "*" and "~" alone.
func checkExportTo(errs *fieldErrors, path, namespace string, exportTo []string, serviceEntry bool) {
	seen := map[string]bool{}
	for i, e := range exportTo {
		p := idx(path, i)
		k := e
		if e == "." {
			k = namespace
		}
		switch {
		case seen[k]:
			errs.add(p, "duplicate entry %q", e)
		case e == "~" && !serviceEntry:
			errs.add(p, "~ (nobody) is only allowed for ServiceEntries")
		case e != "." && e != "*" && e != "~" && len(validation.IsDNS1123Label(e)) > 0:
			errs.add(p, "%q: want \".\", \"*\" or a namespace name", e)
		}
		seen[k] = true
	}
	if len(exportTo) > 1 && (seen["*"] || seen["~"]) {
		errs.add(path, "\"*\" and \"~\" cannot be combined with other entries")
	}
}
