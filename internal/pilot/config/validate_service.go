package config

import (
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

type namespaceSpec = corev1.NamespaceSpec

// validateService applies the API server's rules that matter to generated
// config: ports, their names and protocols, the selector and ExternalName.
func validateService(r *Resource, errs *fieldErrors) bool {
	s, ok := r.Spec.(*corev1.ServiceSpec)
	if !ok {
		return false
	}
	switch s.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Ports) == 0 && s.ClusterIP != corev1.ClusterIPNone {
			errs.add("spec.ports", "required (unless clusterIP is None)")
		}
	case corev1.ServiceTypeExternalName:
		if len(validation.IsDNS1123Subdomain(strings.TrimSuffix(s.ExternalName, "."))) > 0 {
			errs.add("spec.externalName", "%q is not a valid DNS name", s.ExternalName)
		}
	default:
		errs.add("spec.type", "unsupported value %q; want ClusterIP, NodePort, LoadBalancer or ExternalName", s.Type)
	}
	names := map[string]bool{}
	numbers := map[string]bool{}
	for i, p := range s.Ports {
		path := idx("spec.ports", i)
		if p.Name == "" && len(s.Ports) > 1 {
			errs.add(path+".name", "required when there is more than one port")
		} else if p.Name != "" {
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				errs.add(path+".name", "%q: %s", p.Name, msg)
			}
		}
		if names[p.Name] && p.Name != "" {
			errs.add(path+".name", "duplicate port name %q", p.Name)
		}
		names[p.Name] = true
		checkPort(errs, path+".port", int64(p.Port))
		protocol := p.Protocol
		switch protocol {
		case "":
			protocol = corev1.ProtocolTCP
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs.add(path+".protocol", "unsupported value %q; want TCP, UDP or SCTP", p.Protocol)
		}
		k := string(protocol) + "/" + strconv.Itoa(int(p.Port))
		if numbers[k] {
			errs.add(path+".port", "duplicate port %d/%s", p.Port, protocol)
		}
		numbers[k] = true
		checkTargetPort(errs, path+".targetPort", p.TargetPort)
		if p.NodePort < 0 || p.NodePort > 65535 {
			errs.add(path+".nodePort", "%d is not in the range 0-65535", p.NodePort)
		}
		if p.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
				errs.add(path+".appProtocol", "%q: %s", *p.AppProtocol, msg)
			}
		}
	}
	checkLabels(errs, "spec.selector", s.Selector)
	return true
}

func checkTargetPort(errs *fieldErrors, path string, tp intstr.IntOrString) {
	if tp.Type == intstr.String {
		for _, msg := range validation.IsValidPortName(tp.StrVal) {
			errs.add(path, "%q: %s", tp.StrVal, msg)
		}
		return
	}
	if tp.IntVal != 0 { // 0 means "same as port"
		checkPort(errs, path, int64(tp.IntVal))
	}
}

// validateServiceEntry follows Istio's rules, including which resolutions
// need or forbid endpoints.
func validateServiceEntry(r *Resource, errs *fieldErrors) bool {
	se, ok := r.Spec.(*networking.ServiceEntry)
	if !ok {
		return false
	}
	if len(se.Hosts) == 0 {
		errs.add("spec.hosts", "required")
	}
	for i, h := range se.Hosts {
		path := idx("spec.hosts", i)
		if h == "*" {
			errs.add(path, "the full wildcard \"*\" is not allowed")
			continue
		}
		checkHost(errs, path, h)
		if se.Resolution == networking.ServiceEntry_DYNAMIC_DNS && !strings.HasPrefix(h, "*") {
			errs.add(path, "must be a wildcard host for resolution DYNAMIC_DNS")
		}
	}
	cidr := false
	for i, a := range se.Addresses {
		cidr = cidr || strings.Contains(a, "/")
		checkIPOrCIDR(errs, idx("spec.addresses", i), a)
	}
	if cidr && se.Resolution != networking.ServiceEntry_NONE && se.Resolution != networking.ServiceEntry_STATIC {
		errs.add("spec.addresses", "CIDR blocks are only allowed with resolution NONE or STATIC")
	}
	if se.WorkloadSelector != nil {
		if len(se.Endpoints) > 0 {
			errs.add("spec.workloadSelector", "cannot be set together with endpoints")
		}
		checkSelector(errs, "spec.workloadSelector.labels", se.WorkloadSelector.Labels)
	}
	portNames := checkServiceEntryPorts(errs, se)
	checkResolution(errs, se, portNames)
	// Plain TCP carries no host name, so several hosts cannot share a port
	// unless Istio ignores the hosts (resolution NONE).
	if se.Resolution != networking.ServiceEntry_NONE && len(se.Hosts) > 1 {
		for i, p := range se.Ports {
			if p != nil && !protocolIsHTTP(p.Protocol) && !protocolIsTLS(p.Protocol) {
				errs.add(idx("spec.ports", i), "several hosts need HTTP or TLS ports (protocol is %q)", p.Protocol)
				break
			}
		}
	}
	checkExportTo(errs, "spec.exportTo", r.Meta.Namespace, se.ExportTo, true)
	return true
}

// checkResolution applies the rules that depend on how endpoints are found:
// NONE has none, STATIC lists IPs, DNS resolves names (the hosts themselves
// when there are no endpoints, so they cannot be wildcards), DYNAMIC_DNS
// resolves the request's host.
func checkResolution(errs *fieldErrors, se *networking.ServiceEntry, portNames map[string]bool) {
	switch se.Resolution {
	case networking.ServiceEntry_NONE:
		if len(se.Endpoints) > 0 {
			errs.add("spec.endpoints", "must be empty for resolution NONE")
		}
	case networking.ServiceEntry_STATIC:
		for i, ep := range se.Endpoints {
			checkEndpoint(errs, idx("spec.endpoints", i), ep, portNames, false)
		}
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN:
		if len(se.Endpoints) == 0 {
			for i, h := range se.Hosts {
				if strings.Contains(h, "*") {
					errs.add(idx("spec.hosts", i), "must be a name, not a wildcard, for resolution %s without endpoints", se.Resolution)
				}
			}
		}
		if se.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN && len(se.Endpoints) > 1 {
			errs.add("spec.endpoints", "at most one endpoint is allowed for resolution DNS_ROUND_ROBIN")
		}
		for i, ep := range se.Endpoints {
			checkEndpoint(errs, idx("spec.endpoints", i), ep, portNames, true)
		}
	case networking.ServiceEntry_DYNAMIC_DNS:
		if len(se.Addresses) > 0 {
			errs.add("spec.addresses", "must be empty for resolution DYNAMIC_DNS")
		}
		if len(se.Endpoints) > 0 {
			errs.add("spec.endpoints", "must be empty for resolution DYNAMIC_DNS")
		}
		if se.Location != networking.ServiceEntry_MESH_EXTERNAL && se.Location != networking.ServiceEntry_MESH_INTERNAL {
			errs.add("spec.location", "must be MESH_EXTERNAL or MESH_INTERNAL for resolution DYNAMIC_DNS")
		}
	default:
		errs.add("spec.resolution", "unsupported value %d", se.Resolution)
	}
}

// checkServiceEntryPorts returns the set of port names, against which
// endpoint port maps are checked.
func checkServiceEntryPorts(errs *fieldErrors, se *networking.ServiceEntry) map[string]bool {
	names := map[string]bool{}
	numbers := map[uint32]bool{}
	for i, p := range se.Ports {
		path := idx("spec.ports", i)
		if p == nil {
			errs.add(path, "must not be null")
			continue
		}
		if names[p.Name] {
			errs.add(path+".name", "duplicate port name %q", p.Name)
		}
		names[p.Name] = true
		if numbers[p.Number] {
			errs.add(path+".number", "duplicate port number %d", p.Number)
		}
		numbers[p.Number] = true
		checkPortName(errs, path+".name", p.Name)
		checkPort(errs, path+".number", int64(p.Number))
		if p.TargetPort != 0 {
			checkPort(errs, path+".targetPort", int64(p.TargetPort))
		}
		checkProtocol(errs, path+".protocol", p.Protocol)
		if se.Resolution == networking.ServiceEntry_DYNAMIC_DNS && !protocolIsHTTP(p.Protocol) && !protocolIsTLS(p.Protocol) {
			errs.add(path+".protocol", "resolution DYNAMIC_DNS supports only HTTP, HTTP2, GRPC and TLS ports")
		}
	}
	return names
}

// checkEndpoint checks a WorkloadEntry, inline in a ServiceEntry (with the
// entry's port names) or standalone (servicePorts nil).
func checkEndpoint(errs *fieldErrors, path string, we *networking.WorkloadEntry, servicePorts map[string]bool, allowFQDN bool) {
	if we == nil {
		errs.add(path, "must not be null")
		return
	}
	addr := we.Address
	switch {
	case addr == "":
		if we.Network == "" {
			errs.add(path+".address", "required unless network is set")
		}
	case strings.HasPrefix(addr, "unix://"):
		if p := strings.TrimPrefix(addr, "unix://"); !strings.HasPrefix(p, "@") && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/")) {
			errs.add(path+".address", "%q is not an absolute path to a unix socket", addr)
		}
		if len(we.Ports) > 0 {
			errs.add(path+".ports", "must be empty for a unix socket address")
		}
	case isIP(addr):
	case !allowFQDN:
		errs.add(path+".address", "%q is not a valid IP address", addr)
	default:
		if p := hostProblem(addr, false); p != "" {
			errs.add(path+".address", "%q is neither an IP address nor a valid host name: %s", addr, p)
		}
	}
	for name, port := range sortedMap(we.Ports) {
		p := key(path+".ports", name)
		if servicePorts != nil && !servicePorts[name] {
			errs.add(p, "port name %q is not one of the ServiceEntry's ports", name)
		}
		checkPortName(errs, p, name)
		checkPort(errs, p, int64(port))
	}
	checkLabels(errs, path+".labels", we.Labels)
}

func validateWorkloadEntry(r *Resource, errs *fieldErrors) bool {
	we, ok := r.Spec.(*networking.WorkloadEntry)
	if !ok {
		return false
	}
	// Without its ServiceEntry the address may be an IP or a host name.
	checkEndpoint(errs, "spec", we, nil, true)
	return true
}
