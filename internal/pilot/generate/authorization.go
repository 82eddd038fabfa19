package generate

import (
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/emptypb"
	securityv1beta1 "istio.io/api/security/v1beta1"
	"istio.io/istio/pkg/workloadapi/security"
)

// StaticStrictPolicyName is istiod's policy that stands for STRICT mutual
// TLS on a workload: it is in the root namespace and a workload under STRICT
// names it among its authorization policies. The underscores make it a name
// no Kubernetes object can have.
const StaticStrictPolicyName = "istio_converted_static_strict"

// StaticStrictAuthorization is istiod's static STRICT policy: deny any
// connection whose source has no identity, that is, any that did not come
// over mutual TLS.
func StaticStrictAuthorization(rootNamespace string) *security.Authorization {
	return &security.Authorization{
		Name:      StaticStrictPolicyName,
		Namespace: rootNamespace,
		Scope:     security.Scope_WORKLOAD_SELECTOR,
		Action:    security.Action_DENY,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
			NotPrincipals: []*security.StringMatch{presence()},
		}}}}}},
	}
}

func presence() *security.StringMatch {
	return &security.StringMatch{MatchType: &security.StringMatch_Presence{Presence: &emptypb.Empty{}}}
}

// L4ConditionKeys are the `when` keys a node proxy can evaluate; the
// others need HTTP and so a waypoint.
var L4ConditionKeys = []string{"source.ip", "source.namespace", "source.principal", "destination.ip", "destination.port"}

// Authorization converts an AuthorizationPolicy for the node proxies, as
// istiod does: one group per rule, ANDing a rule's `to` matches, its `from`
// matches and each `when` condition. A rule that needs HTTP attributes
// (hosts, methods, paths, request principals, remote IPs, an HTTP `when`)
// cannot be checked at L4: an ALLOW policy drops the rule (it never
// matches), a DENY policy keeps it without the HTTP parts (it matches more),
// so L4 enforcement is never more permissive than the policy. Only ALLOW
// and DENY reach here (validation refuses the others). A policy in
// rootNamespace without a selector applies mesh-wide, one without a selector
// to its namespace, one with a selector to the workloads that name it.
func Authorization(namespace, name, rootNamespace string, spec *securityv1beta1.AuthorizationPolicy) *security.Authorization {
	out := &security.Authorization{Name: name, Namespace: namespace, Scope: security.Scope_WORKLOAD_SELECTOR, Action: security.Action_ALLOW}
	if spec.GetSelector() == nil {
		out.Scope = security.Scope_NAMESPACE
		if namespace == rootNamespace {
			out.Scope = security.Scope_GLOBAL
		}
	}
	if spec.GetAction() == securityv1beta1.AuthorizationPolicy_DENY {
		out.Action = security.Action_DENY
	}
	for _, rule := range spec.GetRules() {
		rules, l7 := authorizationRules(rule, namespace)
		if l7 && out.Action == security.Action_ALLOW {
			continue
		}
		if len(rules) > 0 {
			out.Groups = append(out.Groups, &security.Group{Rules: rules})
		}
	}
	return out
}

// IsL7Only says whether a policy has rules that only a waypoint can
// evaluate in full (hosts, methods, paths, request principals, remote IPs,
// HTTP conditions).
func IsL7Only(spec *securityv1beta1.AuthorizationPolicy) bool {
	for _, rule := range spec.GetRules() {
		if _, l7 := authorizationRules(rule, ""); l7 {
			return true
		}
	}
	return false
}

// authorizationRules converts one rule and says whether it had HTTP parts.
func authorizationRules(rule *securityv1beta1.Rule, namespace string) ([]*security.Rules, bool) {
	l7 := false
	var to, from []*security.Match
	for _, t := range rule.GetTo() {
		op := t.GetOperation()
		if len(op.GetHosts())+len(op.GetNotHosts())+len(op.GetMethods())+len(op.GetNotMethods())+len(op.GetPaths())+len(op.GetNotPaths()) > 0 {
			l7 = true
		}
		to = append(to, &security.Match{DestinationPorts: ports(op.GetPorts()), NotDestinationPorts: ports(op.GetNotPorts())})
	}
	for _, f := range rule.GetFrom() {
		src := f.GetSource()
		if len(src.GetRequestPrincipals())+len(src.GetNotRequestPrincipals())+len(src.GetRemoteIpBlocks())+len(src.GetNotRemoteIpBlocks()) > 0 {
			l7 = true
		}
		from = append(from, &security.Match{
			SourceIps:          addresses(src.GetIpBlocks()),
			NotSourceIps:       addresses(src.GetNotIpBlocks()),
			Namespaces:         stringMatches(src.GetNamespaces()),
			NotNamespaces:      stringMatches(src.GetNotNamespaces()),
			ServiceAccounts:    serviceAccounts(src.GetServiceAccounts(), namespace),
			NotServiceAccounts: serviceAccounts(src.GetNotServiceAccounts(), namespace),
			Principals:         stringMatches(src.GetPrincipals()),
			NotPrincipals:      stringMatches(src.GetNotPrincipals()),
		})
	}
	var out []*security.Rules
	if len(to) > 0 {
		out = append(out, &security.Rules{Matches: to})
	}
	if len(from) > 0 {
		out = append(out, &security.Rules{Matches: from})
	}
	for _, when := range rule.GetWhen() {
		m, ok := conditionMatch(when)
		if !ok {
			l7 = true
			continue
		}
		out = append(out, &security.Rules{Matches: []*security.Match{m}})
	}
	return out, l7
}

// conditionMatch converts an L4 `when` condition; false for the others.
func conditionMatch(c *securityv1beta1.Condition) (*security.Match, bool) {
	v, nv := c.GetValues(), c.GetNotValues()
	switch c.GetKey() {
	case "source.ip":
		return &security.Match{SourceIps: addresses(v), NotSourceIps: addresses(nv)}, true
	case "source.namespace":
		return &security.Match{Namespaces: stringMatches(v), NotNamespaces: stringMatches(nv)}, true
	case "source.principal":
		return &security.Match{Principals: stringMatches(v), NotPrincipals: stringMatches(nv)}, true
	case "destination.ip":
		return &security.Match{DestinationIps: addresses(v), NotDestinationIps: addresses(nv)}, true
	case "destination.port":
		return &security.Match{DestinationPorts: ports(v), NotDestinationPorts: ports(nv)}, true
	}
	return nil, false
}

// stringMatches reads Istio's match syntax: "*" is any value present,
// "*x" a suffix, "x*" a prefix, anything else exact.
func stringMatches(values []string) []*security.StringMatch {
	var out []*security.StringMatch
	for _, v := range values {
		var m *security.StringMatch
		switch {
		case v == "*":
			m = presence()
		case strings.HasPrefix(v, "*"):
			m = &security.StringMatch{MatchType: &security.StringMatch_Suffix{Suffix: v[1:]}}
		case strings.HasSuffix(v, "*"):
			m = &security.StringMatch{MatchType: &security.StringMatch_Prefix{Prefix: v[:len(v)-1]}}
		default:
			m = &security.StringMatch{MatchType: &security.StringMatch_Exact{Exact: v}}
		}
		out = append(out, m)
	}
	return out
}

// serviceAccounts reads NS/SA, or SA in the policy's namespace.
func serviceAccounts(values []string, namespace string) []*security.ServiceAccountMatch {
	var out []*security.ServiceAccountMatch
	for _, v := range values {
		if ns, sa, ok := strings.Cut(v, "/"); ok {
			out = append(out, &security.ServiceAccountMatch{Namespace: ns, ServiceAccount: sa})
		} else {
			out = append(out, &security.ServiceAccountMatch{Namespace: namespace, ServiceAccount: v})
		}
	}
	return out
}

// ports reads port numbers; validation has refused anything else.
func ports(values []string) []uint32 {
	var out []uint32
	for _, v := range values {
		if p, err := strconv.ParseUint(v, 10, 16); err == nil {
			out = append(out, uint32(p))
		}
	}
	return out
}

// addresses reads IPs and CIDR blocks; validation has refused anything else.
func addresses(values []string) []*security.Address {
	var out []*security.Address
	for _, v := range values {
		prefix, err := netip.ParsePrefix(v)
		if err != nil {
			addr, err := netip.ParseAddr(v)
			if err != nil {
				continue
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, &security.Address{Address: prefix.Addr().AsSlice(), Length: uint32(prefix.Bits())})
	}
	return out
}
