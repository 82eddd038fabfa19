package config

import (
	"net"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// validateGateway follows Istio's rules for servers: a port, hosts in
// "namespace/host" (or legacy "host") form, and TLS settings that agree with
// the port's protocol.
func validateGateway(r *Resource, errs *fieldErrors) bool {
	gw, ok := r.Spec.(*networking.Gateway)
	if !ok {
		return false
	}
	if len(gw.Servers) == 0 {
		errs.add("spec.servers", "required")
	}
	portNames := map[string]bool{}
	for i, s := range gw.Servers {
		path := idx("spec.servers", i)
		if s == nil {
			errs.add(path, "must not be null")
			continue
		}
		if len(s.Hosts) == 0 {
			errs.add(path+".hosts", "required")
		}
		for j, h := range s.Hosts {
			checkNamespacedHost(errs, idx(path+".hosts", j), h, true)
		}
		portOK := checkServerPort(errs, path, s)
		if s.Port != nil {
			if portNames[s.Port.Name] {
				errs.add(path+".port.name", "duplicate port name %q (server port names must be unique)", s.Port.Name)
			}
			portNames[s.Port.Name] = true
		}
		checkServerTLS(errs, path+".tls", s.Tls)
		if portOK {
			checkServerTLSAgainstProtocol(errs, path, s)
		}
	}
	checkSelector(errs, "spec.selector", gw.Selector)
	return true
}

func checkServerPort(errs *fieldErrors, path string, s *networking.Server) bool {
	p := s.Port
	if p == nil {
		errs.add(path+".port", "required")
		return false
	}
	n := len(*errs)
	if p.Protocol == "" || !istioProtocols[strings.ToLower(p.Protocol)] {
		errs.add(path+".port.protocol", "invalid protocol %q; want HTTP, HTTPS, HTTP2, GRPC, TLS, TCP, Mongo, Redis or MySQL", p.Protocol)
	}
	unix := strings.HasPrefix(s.Bind, "unix://")
	if p.Number > 0 || !unix {
		checkPort(errs, path+".port.number", int64(p.Number))
	}
	if unix && p.Number != 0 {
		errs.add(path+".port.number", "must be 0 with a unix socket bind")
	}
	if !unix && s.Bind != "" && !isIP(s.Bind) {
		errs.add(path+".bind", "%q is not an IP address or unix:// path", s.Bind)
	}
	//lint:ignore SA1019 deprecated, and Istio rejects it here
	if p.TargetPort > 0 {
		errs.add(path+".port.targetPort", "has no effect on Gateways")
	}
	if p.Name == "" {
		errs.add(path+".port.name", "required")
	}
	return len(*errs) == n
}

func checkServerTLSAgainstProtocol(errs *fieldErrors, path string, s *networking.Server) {
	isTLS := protocolIsTLS(s.Port.Protocol)
	switch {
	case isTLS && s.Tls == nil:
		errs.add(path+".tls", "required for HTTPS and TLS ports")
	case isTLS || s.Tls == nil:
	case !protocolIsHTTP(s.Port.Protocol):
		errs.add(path+".tls", "only HTTPS and TLS ports take TLS settings")
	default:
		// A plain-text HTTP server may carry tls only for httpsRedirect, which
		// leaves the mode at its default, PASSTHROUGH, and sets no files.
		t := s.Tls
		passthrough := t.Mode == networking.ServerTLSSettings_PASSTHROUGH || t.Mode == networking.ServerTLSSettings_AUTO_PASSTHROUGH
		if !passthrough || t.CaCertificates != "" || t.PrivateKey != "" || t.ServerCertificate != "" {
			errs.add(path+".tls", "plain-text HTTP ports take no TLS settings except httpsRedirect")
		}
	}
}

func checkServerTLS(errs *fieldErrors, path string, t *networking.ServerTLSSettings) {
	if t == nil {
		return
	}
	if t.Mode == networking.ServerTLSSettings_ISTIO_MUTUAL {
		if t.ServerCertificate != "" || t.PrivateKey != "" || t.CaCertificates != "" || len(t.TlsCertificates) > 0 ||
			t.CredentialName != "" || len(t.CredentialNames) > 0 {
			errs.add(path, "mode ISTIO_MUTUAL uses the workload certificate; remove certificates and credentialName(s)")
		}
		return
	}
	sources := 0
	for _, set := range []bool{t.ServerCertificate != "" && t.PrivateKey != "", t.CredentialName != "", len(t.CredentialNames) > 0, len(t.TlsCertificates) > 0} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		errs.add(path, "only one of credentialName, credentialNames, serverCertificate/privateKey and tlsCertificates may be set")
	}
	if t.CaCrl != "" && t.CredentialName != "" {
		errs.add(path+".caCrl", "not supported with credentialName")
	}
	switch t.Mode {
	case networking.ServerTLSSettings_SIMPLE, networking.ServerTLSSettings_MUTUAL, networking.ServerTLSSettings_OPTIONAL_MUTUAL:
	default:
		return
	}
	if t.CredentialName != "" || len(t.CredentialNames) > 0 {
		return // certificates come from the secret
	}
	if t.Mode != networking.ServerTLSSettings_SIMPLE && t.CaCertificates == "" {
		errs.add(path+".caCertificates", "required for mode %s without credentialName", t.Mode)
	}
	if len(t.TlsCertificates) > 0 {
		for i, c := range t.TlsCertificates {
			if c.GetServerCertificate() == "" || c.GetPrivateKey() == "" {
				errs.add(idx(path+".tlsCertificates", i), "serverCertificate and privateKey are required")
			}
		}
		return
	}
	if t.ServerCertificate == "" {
		errs.add(path+".serverCertificate", "required for mode %s without credentialName", t.Mode)
	}
	if t.PrivateKey == "" {
		errs.add(path+".privateKey", "required for mode %s without credentialName", t.Mode)
	}
}

// checkNamespacedHost checks "namespace/dnsName" hosts. In a Gateway the
// namespace is "*", "." or a name and may be omitted; in a Sidecar it is
// required and may also be "~" (none), or a name prefixed with "~". The
// dnsName is "*", "*.suffix" or an FQDN (short names are not allowed); a
// Gateway also accepts an IP address.
func checkNamespacedHost(errs *fieldErrors, path, h string, gateway bool) {
	ns, dns, found := strings.Cut(h, "/")
	if !found {
		if !gateway {
			errs.add(path, "%q: want namespace/dnsName", h)
			return
		}
		ns, dns = "*", h
	}
	if ns == "" || dns == "" {
		errs.add(path, "%q: namespace and dnsName must not be empty", h)
		return
	}
	name := ns
	if !gateway {
		name = strings.TrimPrefix(ns, "~")
	}
	if name != "" && name != "*" && name != "." && !isKubeLabel(name) {
		errs.add(path, "%q: invalid namespace %q; want a name, \"*\", \".\" or \"~\"", h, ns)
	}
	if gateway && isIP(dns) {
		return
	}
	if dns != "*" && !strings.Contains(dns, ".") {
		errs.add(path, "%q: short name %q is not allowed; use an FQDN, \"*\" or \"*.suffix\"", h, dns)
		return
	}
	if strings.Contains(dns, "*") && dns != "*" && !strings.HasPrefix(dns, "*.") {
		errs.add(path, "%q: partial wildcard %q is not allowed", h, dns)
		return
	}
	if p := hostProblem(dns, true); p != "" {
		errs.add(path, "%q: %s", h, p)
	}
}

// validateSidecar follows Istio's rules for ingress and egress listeners.
func validateSidecar(r *Resource, errs *fieldErrors) bool {
	sc, ok := r.Spec.(*networking.Sidecar)
	if !ok {
		return false
	}
	if len(sc.Egress) == 0 && len(sc.Ingress) == 0 && sc.OutboundTrafficPolicy == nil && sc.InboundConnectionPool == nil {
		errs.add("spec", "empty Sidecar: set egress, ingress, outboundTrafficPolicy or inboundConnectionPool")
	}
	if ws := sc.WorkloadSelector; ws != nil {
		checkSelector(errs, "spec.workloadSelector.labels", ws.Labels)
	}
	ports := map[uint32]bool{}
	for i, in := range sc.Ingress {
		checkSidecarIngress(errs, idx("spec.ingress", i), in, ports)
	}
	checkConnectionPool(errs, "spec.inboundConnectionPool", sc.InboundConnectionPool)
	ports = map[uint32]bool{}
	sockets := map[string]bool{}
	for i, eg := range sc.Egress {
		path := idx("spec.egress", i)
		if eg == nil {
			errs.add(path, "must not be null")
			continue
		}
		if eg.Port == nil {
			// The catch-all listener, without a port, must come last.
			if i != len(sc.Egress)-1 {
				errs.add(path+".port", "required except on the last egress listener")
			}
		} else {
			checkSidecarEgressPort(errs, path, eg)
			switch {
			case eg.Port.Number == 0 && sockets[eg.Bind]:
				errs.add(path+".bind", "duplicate unix socket %q", eg.Bind)
			case eg.Port.Number != 0 && ports[eg.Port.Number]:
				errs.add(path+".port.number", "duplicate port %d", eg.Port.Number)
			}
			sockets[eg.Bind] = sockets[eg.Bind] || eg.Port.Number == 0
			ports[eg.Port.Number] = ports[eg.Port.Number] || eg.Port.Number != 0
		}
		if len(eg.Hosts) == 0 {
			errs.add(path+".hosts", "required")
		}
		for j, h := range eg.Hosts {
			checkNamespacedHost(errs, idx(path+".hosts", j), h, false)
		}
	}
	if tp := sc.OutboundTrafficPolicy; tp != nil && tp.EgressProxy != nil {
		if tp.Mode != networking.OutboundTrafficPolicy_ALLOW_ANY {
			errs.add("spec.outboundTrafficPolicy.egressProxy", "only allowed with mode ALLOW_ANY")
		} else {
			if tp.EgressProxy.Port == nil {
				errs.add("spec.outboundTrafficPolicy.egressProxy.port", "required")
			}
			checkDestination(errs, "spec.outboundTrafficPolicy.egressProxy", tp.EgressProxy)
		}
	}
	return true
}

func checkSidecarIngress(errs *fieldErrors, path string, in *networking.IstioIngressListener, ports map[uint32]bool) {
	if in == nil {
		errs.add(path, "must not be null")
		return
	}
	p := in.Port
	if p == nil {
		errs.add(path+".port", "required")
		return
	}
	if p.Name != "" {
		checkPortName(errs, path+".port.name", p.Name)
	}
	checkProtocol(errs, path+".port.protocol", p.Protocol)
	checkPort(errs, path+".port.number", int64(p.Number))
	//lint:ignore SA1019 deprecated, and Istio rejects it here
	if p.TargetPort > 0 {
		errs.add(path+".port.targetPort", "has no effect on Sidecars")
	}
	if ports[p.Number] {
		errs.add(path+".port.number", "duplicate port %d", p.Number)
	}
	ports[p.Number] = true
	if in.Bind != "" && !isIP(in.Bind) {
		errs.add(path+".bind", "%q is not an IP address", in.Bind)
	}
	if ep := in.DefaultEndpoint; ep != "" && !strings.HasPrefix(ep, "unix://") {
		host, port, err := net.SplitHostPort(ep)
		n, convErr := strconv.Atoi(port)
		switch {
		case err != nil || convErr != nil || !validPort(int64(n)):
			errs.add(path+".defaultEndpoint", "%q: want 127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT or unix://PATH", ep)
		case host != "127.0.0.1" && host != "0.0.0.0" && host != "::1" && host != "::" && host != "":
			errs.add(path+".defaultEndpoint", "%q: the host must be 127.0.0.1, 0.0.0.0, ::1 or ::", ep)
		}
	}
	if t := in.Tls; t != nil {
		if !protocolIsTLS(p.Protocol) {
			errs.add(path+".tls", "only HTTPS and TLS ports take TLS settings")
		}
		if t.Mode == networking.ServerTLSSettings_ISTIO_MUTUAL || t.Mode == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
			errs.add(path+".tls.mode", "%s is not supported on sidecar ingress", t.Mode)
		}
		if t.CredentialName != "" || len(t.CredentialNames) > 0 || len(t.TlsCertificates) > 0 || len(t.SubjectAltNames) > 0 || t.HttpsRedirect {
			errs.add(path+".tls", "credentialName(s), tlsCertificates, subjectAltNames and httpsRedirect are not supported on sidecar ingress")
		}
		checkServerTLS(errs, path+".tls", t)
	}
	checkConnectionPool(errs, path+".connectionPool", in.ConnectionPool)
}

func checkSidecarEgressPort(errs *fieldErrors, path string, eg *networking.IstioEgressListener) {
	p := eg.Port
	if p.Name != "" {
		checkPortName(errs, path+".port.name", p.Name)
	}
	checkProtocol(errs, path+".port.protocol", p.Protocol)
	//lint:ignore SA1019 deprecated, and Istio rejects it here
	if p.TargetPort > 0 {
		errs.add(path+".port.targetPort", "has no effect on Sidecars")
	}
	if p.Number == 0 {
		if !strings.HasPrefix(eg.Bind, "unix://") {
			errs.add(path+".bind", "a listener with port 0 needs a unix:// socket bind")
		}
		if eg.CaptureMode != networking.CaptureMode_DEFAULT && eg.CaptureMode != networking.CaptureMode_NONE {
			errs.add(path+".captureMode", "must be DEFAULT or NONE for unix socket listeners")
		}
		return
	}
	checkPort(errs, path+".port.number", int64(p.Number))
	if eg.Bind != "" && !isIP(eg.Bind) {
		errs.add(path+".bind", "%q is not an IP address", eg.Bind)
	}
}
