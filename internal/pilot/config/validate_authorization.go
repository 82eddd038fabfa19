package config

import (
	"slices"
	"strconv"
	"strings"

	security "istio.io/api/security/v1beta1"
)

// l4ConditionKeys are the `when` keys the control plane supports: the ones
// a node proxy evaluates (istiod converts these for ztunnel). The HTTP ones
// (request.headers, request.auth.*, ...) need a waypoint, which is not
// generated yet.
var l4ConditionKeys = []string{"source.ip", "source.namespace", "source.principal", "destination.ip", "destination.port"}

// validateAuthorizationPolicy applies Istio's rules to what the control
// plane supports: ALLOW and DENY (CUSTOM needs an external authorizer, AUDIT
// a telemetry plugin, neither of which exists here), a workload selector,
// rules with sources, operations and L4 conditions. Policies attached by
// targetRef are refused (they bind to a Gateway or Service for waypoints,
// whose configuration is not generated yet).
func validateAuthorizationPolicy(r *Resource, errs *fieldErrors) bool {
	ap, ok := r.Spec.(*security.AuthorizationPolicy)
	if !ok {
		return false
	}
	switch ap.Action {
	case security.AuthorizationPolicy_ALLOW, security.AuthorizationPolicy_DENY:
	default:
		errs.add("spec.action", "%s is not supported; want ALLOW or DENY", ap.Action)
	}
	if ap.GetProvider() != nil {
		errs.add("spec.provider", "not supported (it is for action CUSTOM)")
	}
	if ap.TargetRef != nil || len(ap.TargetRefs) > 0 {
		errs.add("spec.targetRefs", "not supported; select workloads with spec.selector")
	}
	if ap.Selector != nil {
		checkSelector(errs, "spec.selector.matchLabels", ap.Selector.MatchLabels)
	}
	for i, rule := range ap.Rules {
		path := idx("spec.rules", i)
		if rule == nil {
			errs.add(path, "must not be null")
			continue
		}
		for j, from := range rule.From {
			checkSource(errs, idx(path+".from", j)+".source", from.GetSource())
		}
		for j, to := range rule.To {
			checkOperation(errs, idx(path+".to", j)+".operation", to.GetOperation())
		}
		for j, when := range rule.When {
			checkCondition(errs, idx(path+".when", j), when)
		}
	}
	return true
}

// matchList is one list field of a source or operation and how each of its
// values is checked.
type matchList struct {
	name   string
	values []string
	check  func(errs *fieldErrors, path, value string)
}

// checkMatchLists checks every value of the lists and that at least one list
// is set: Istio refuses an empty source or operation.
func checkMatchLists(errs *fieldErrors, path string, lists []matchList) {
	empty := true
	for _, l := range lists {
		empty = empty && len(l.values) == 0
		for i, v := range l.values {
			l.check(errs, idx(path+"."+l.name, i), v)
		}
	}
	if empty {
		errs.add(path, "at least one field is required")
	}
}

func checkSource(errs *fieldErrors, path string, s *security.Source) {
	if s == nil {
		errs.add(path, "required")
		return
	}
	checkMatchLists(errs, path, []matchList{
		{"principals", s.Principals, checkNonEmpty}, {"notPrincipals", s.NotPrincipals, checkNonEmpty},
		{"requestPrincipals", s.RequestPrincipals, checkNonEmpty}, {"notRequestPrincipals", s.NotRequestPrincipals, checkNonEmpty},
		{"namespaces", s.Namespaces, checkNonEmpty}, {"notNamespaces", s.NotNamespaces, checkNonEmpty},
		{"serviceAccounts", s.ServiceAccounts, checkNonEmpty}, {"notServiceAccounts", s.NotServiceAccounts, checkNonEmpty},
		{"ipBlocks", s.IpBlocks, checkIPOrCIDR}, {"notIpBlocks", s.NotIpBlocks, checkIPOrCIDR},
		{"remoteIpBlocks", s.RemoteIpBlocks, checkIPOrCIDR}, {"notRemoteIpBlocks", s.NotRemoteIpBlocks, checkIPOrCIDR},
	})
}

func checkOperation(errs *fieldErrors, path string, o *security.Operation) {
	if o == nil {
		errs.add(path, "required")
		return
	}
	checkMatchLists(errs, path, []matchList{
		{"hosts", o.Hosts, checkNonEmpty}, {"notHosts", o.NotHosts, checkNonEmpty},
		{"ports", o.Ports, checkPortString}, {"notPorts", o.NotPorts, checkPortString},
		{"methods", o.Methods, checkNonEmpty}, {"notMethods", o.NotMethods, checkNonEmpty},
		{"paths", o.Paths, checkNonEmpty}, {"notPaths", o.NotPaths, checkNonEmpty},
	})
}

func checkCondition(errs *fieldErrors, path string, c *security.Condition) {
	if c == nil {
		errs.add(path, "must not be null")
		return
	}
	switch {
	case c.Key == "":
		errs.add(path+".key", "required")
	case !slices.Contains(l4ConditionKeys, c.Key):
		errs.add(path+".key", "%q is not supported; supported keys: %s", c.Key, strings.Join(l4ConditionKeys, ", "))
	}
	if len(c.Values) == 0 && len(c.NotValues) == 0 {
		errs.add(path, "values or notValues is required")
	}
	checkConditionValues(errs, path+".values", c.Key, c.Values)
	checkConditionValues(errs, path+".notValues", c.Key, c.NotValues)
}

func checkConditionValues(errs *fieldErrors, path, key string, values []string) {
	check := checkNonEmpty
	switch key {
	case "source.ip", "destination.ip":
		check = checkIPOrCIDR
	case "destination.port":
		check = checkPortString
	}
	for i, v := range values {
		check(errs, idx(path, i), v)
	}
}

func checkNonEmpty(errs *fieldErrors, path, v string) {
	if v == "" {
		errs.add(path, "empty value")
	}
}

func checkPortString(errs *fieldErrors, path, p string) {
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || !validPort(n) {
		errs.add(path, "%q is not a port number (1-65535)", p)
	}
}
