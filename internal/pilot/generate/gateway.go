package generate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Gateway is a Gateway resource with its name and namespace: VirtualServices
// bind to "namespace/name", and HTTPS route names carry both.
type Gateway struct {
	Name      string
	Namespace string
	Spec      *networking.Gateway
}

// GatewayInput is what a gateway proxy's listeners and routes are made of.
type GatewayInput struct {
	Gateways        []Gateway             // those selecting the proxy, oldest first
	VirtualServices []BoundVirtualService // those bound to them and exported to the proxy's namespace, oldest first
	Services        []*model.Service      // the imported services: a destination without a port takes a single-port service's
	DomainSuffix    string                // "cluster.local"
}

// GatewayResources are a gateway proxy's listeners and route configurations.
type GatewayResources struct {
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	// Skipped says, one line each, which servers, listeners and
	// VirtualServices were left out and why, where istiod logs a warning
	// (and counts pilot_total_rejected_configs) and carries on.
	Skipped []string
}

// credentialPrefix is how Istio names the SDS resource of a credentialName
// (a Kubernetes Secret), and caSuffix the one holding its client CA.
const (
	credentialPrefix = "kubernetes://"
	caSuffix         = "-cacert"
)

// GatewaySecretName is the SDS secret a gateway asks for to get the
// certificate of a Gateway server's credentialName, as istiod names it:
// kubernetes://NAME (names that already say their type are kept).
func GatewaySecretName(credentialName string) string {
	if strings.Contains(credentialName, "://") {
		return credentialName
	}
	return credentialPrefix + credentialName
}

// serverKind is how a Gateway server handles its connections.
type serverKind int

const (
	serverHTTP        serverKind = iota // plain-text HTTP; a port's HTTP servers share http.PORT
	serverHTTPS                         // TLS terminated, then HTTP with its own route config
	serverTLS                           // TLS terminated, then opaque TCP
	serverPassthrough                   // TLS passed through, routed by SNI
	serverTCP                           // opaque TCP
)

// gatewayServer is one server of a Gateway, checked and named.
type gatewayServer struct {
	gateway string // namespace/name of its Gateway
	spec    *networking.Server
	kind    serverKind
	hosts   []string // lower case; "ns/host" or "host" (any namespace)
	route   string   // RDS name, HTTP and HTTPS servers only
}

// gatewayPort is one listener: the servers sharing a port (and bind address).
// A port is either plain text (HTTP servers, or one TCP server) or TLS
// (servers told apart by SNI), as istiod merges them.
type gatewayPort struct {
	bind      string
	number    uint32
	plaintext bool
	servers   []*gatewayServer
	sni       map[string]bool // server hosts TLS servers claimed
}

// BuildGateway returns the listeners and routes of a gateway proxy: one
// listener per server port, HTTP servers routed by VirtualServices bound to
// their Gateway over RDS (http.PORT, or https.PORT.PORTNAME.GATEWAY.NAMESPACE
// for each terminating HTTPS server), TLS servers terminated with the
// credentialName's certificate from SDS or passed through by SNI, and TCP
// servers proxied to their VirtualService's tcp route. Servers that conflict
// on a port are left out as istiod leaves them out, and listed in Skipped.
func BuildGateway(in GatewayInput) (*GatewayResources, error) {
	b := newGatewayBuild(in)
	ports, skipped := b.mergeServers()
	out := &GatewayResources{Skipped: skipped}
	routes := map[string][]*gatewayServer{}
	var routeNames []string
	for _, p := range ports {
		l, err := b.listener(p)
		if err != nil {
			return nil, err
		}
		if len(l.FilterChains) == 0 {
			out.Skipped = append(out.Skipped, fmt.Sprintf("listener %s: no VirtualService routes its servers' traffic", l.Name))
		} else {
			out.Listeners = append(out.Listeners, l)
		}
		for _, s := range p.servers {
			if s.route == "" {
				continue
			}
			if _, seen := routes[s.route]; !seen {
				routeNames = append(routeNames, s.route)
			}
			routes[s.route] = append(routes[s.route], s)
		}
	}
	slices.Sort(routeNames)
	for _, name := range routeNames {
		out.Routes = append(out.Routes, b.routeConfig(name, routes[name]))
	}
	out.Skipped = append(out.Skipped, b.skipped...)
	return out, nil
}

// gatewayBuild holds what building one gateway's config looks up repeatedly.
type gatewayBuild struct {
	in       GatewayInput
	services map[string]*model.Service
	vsHosts  [][]string            // qualified hosts of each VirtualService
	vsBound  []map[string]bool     // gateways each VirtualService binds to
	routes   map[string]routeCache // http routes by gateway, VirtualService and port
	skipped  []string
}

type routeCache struct {
	routes []*routev3.Route
	ok     bool
}

func newGatewayBuild(in GatewayInput) *gatewayBuild {
	b := &gatewayBuild{in: in, services: map[string]*model.Service{}, routes: map[string]routeCache{}}
	for _, s := range in.Services {
		b.services[s.Hostname] = s
	}
	for _, vs := range in.VirtualServices {
		var hosts []string
		for _, h := range vs.Spec.GetHosts() {
			hosts = append(hosts, strings.ToLower(qualify(h, vs.Namespace, in.DomainSuffix)))
		}
		b.vsHosts = append(b.vsHosts, hosts)
		bound := map[string]bool{}
		for _, g := range vs.Spec.GetGateways() {
			bound[gatewayRef(g, vs.Namespace)] = true
		}
		b.vsBound = append(b.vsBound, bound)
	}
	return b
}

// gatewayRef resolves a VirtualService's reference to a Gateway: "ns/name",
// or a name in the VirtualService's own namespace.
func gatewayRef(ref, namespace string) string {
	if ref == "mesh" || strings.Contains(ref, "/") {
		return ref
	}
	return namespace + "/" + ref
}

// gatewayListed says whether a match's gateways (none: the VirtualService's)
// include the gateway.
func gatewayListed(refs []string, namespace, gateway string) bool {
	if len(refs) == 0 {
		return true
	}
	for _, r := range refs {
		if gatewayRef(r, namespace) == gateway {
			return true
		}
	}
	return false
}

// mergeServers groups the servers of all Gateways by listener, oldest Gateway
// first, leaving out those istiod would reject.
func (b *gatewayBuild) mergeServers() ([]*gatewayPort, []string) {
	var ports []*gatewayPort
	var skipped []string
	byKey := map[string]*gatewayPort{}
	for i := range b.in.Gateways {
		gw := &b.in.Gateways[i]
		name := gw.Namespace + "/" + gw.Name
		for j, s := range gw.Spec.GetServers() {
			gs, err := newGatewayServer(gw, s)
			if err == nil {
				key := gs.spec.GetBind() + "_" + strconv.FormatUint(uint64(s.GetPort().GetNumber()), 10)
				p := byKey[key]
				if p == nil {
					p = &gatewayPort{bind: s.GetBind(), number: s.GetPort().GetNumber(), sni: map[string]bool{},
						plaintext: gs.kind == serverHTTP || gs.kind == serverTCP}
					byKey[key] = p
					ports = append(ports, p)
				}
				err = p.add(gs)
			}
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("Gateway %s server %d: %v", name, j, err))
			}
		}
	}
	slices.SortStableFunc(ports, func(a, b *gatewayPort) int {
		return cmp.Or(cmp.Compare(a.number, b.number), cmp.Compare(a.bind, b.bind))
	})
	return ports, skipped
}

func newGatewayServer(gw *Gateway, s *networking.Server) (*gatewayServer, error) {
	if s.GetPort() == nil {
		return nil, fmt.Errorf("no port")
	}
	if strings.HasPrefix(s.GetBind(), "unix://") {
		return nil, fmt.Errorf("bind %s: unix sockets are not supported", s.GetBind())
	}
	kind, err := classifyServer(s)
	if err != nil {
		return nil, err
	}
	gs := &gatewayServer{gateway: gw.Namespace + "/" + gw.Name, spec: s, kind: kind}
	for _, h := range s.GetHosts() {
		h = strings.ToLower(h)
		// As istiod: "./host" is the Gateway's namespace, "*/host" any.
		switch ns, dns, ok := strings.Cut(h, "/"); {
		case ok && ns == ".":
			h = gw.Namespace + "/" + dns
		case ok && ns == "*":
			h = dns
		}
		if !slices.Contains(gs.hosts, h) {
			gs.hosts = append(gs.hosts, h)
		}
	}
	port := strconv.FormatUint(uint64(s.GetPort().GetNumber()), 10)
	bind := ""
	if s.GetBind() != "" {
		bind = "." + s.GetBind()
	}
	switch kind {
	case serverHTTP:
		gs.route = "http." + port + bind
	case serverHTTPS:
		gs.route = "https." + port + "." + s.GetPort().GetName() + "." + gw.Name + "." + gw.Namespace + bind
	}
	return gs, nil
}

func classifyServer(s *networking.Server) (serverKind, error) {
	proto := strings.ToUpper(s.GetPort().GetProtocol())
	tls := s.GetTls()
	switch {
	case isHTTP(model.Protocol(proto)):
		return serverHTTP, nil // tls can only ask for httpsRedirect here
	case tls == nil && (proto == "HTTPS" || proto == "TLS"):
		return 0, fmt.Errorf("port %d is %s but the server has no tls settings", s.GetPort().GetNumber(), proto)
	case tls == nil:
		return serverTCP, nil
	}
	switch tls.GetMode() {
	case networking.ServerTLSSettings_PASSTHROUGH:
		return serverPassthrough, nil
	case networking.ServerTLSSettings_AUTO_PASSTHROUGH:
		return 0, fmt.Errorf("tls mode AUTO_PASSTHROUGH is not supported")
	case networking.ServerTLSSettings_ISTIO_MUTUAL:
	default:
		if tls.GetCredentialName() == "" && len(tls.GetCredentialNames()) == 0 {
			return 0, fmt.Errorf("tls mode %s needs credentialName: certificate files are not supported", tls.GetMode())
		}
	}
	if proto == "HTTPS" {
		return serverHTTPS, nil
	}
	return serverTLS, nil
}

// add places a server on the port if it can share it, as istiod's merge does:
// HTTP servers with HTTP servers, TLS servers with TLS servers whose hosts
// differ (their hosts become SNI matches, which must be unique); a TCP server
// shares with nothing.
func (p *gatewayPort) add(s *gatewayServer) error {
	if len(p.servers) > 0 {
		first := p.servers[0]
		plaintext := s.kind == serverHTTP || s.kind == serverTCP
		if plaintext != p.plaintext || (p.plaintext && (s.kind != serverHTTP || first.kind != serverHTTP)) {
			return fmt.Errorf("port %d is already taken by a %s server of Gateway %s", p.number, first.spec.GetPort().GetProtocol(), first.gateway)
		}
	}
	if !p.plaintext {
		hosts := sniHosts(s)
		for _, h := range hosts {
			if p.sni[h] {
				return fmt.Errorf("host %s is already served on port %d", h, p.number)
			}
		}
		for _, h := range hosts {
			p.sni[h] = true
		}
	}
	p.servers = append(p.servers, s)
	return nil
}

// sniHosts are a TLS server's hosts without their namespaces, sorted.
func sniHosts(s *gatewayServer) []string {
	var out []string
	for _, h := range s.hosts {
		if _, dns, ok := strings.Cut(h, "/"); ok {
			h = dns
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// serverNameMatch is a TLS server's filter chain match: its hosts as SNI
// names, or nothing when one of them is "*".
func serverNameMatch(hosts []string) *listenerv3.FilterChainMatch {
	if len(hosts) == 0 || slices.Contains(hosts, "*") {
		return nil
	}
	return &listenerv3.FilterChainMatch{ServerNames: hosts}
}

// listener builds a port's listener: a real socket on the port (a gateway has
// no iptables capture), with a filter chain per server.
func (b *gatewayBuild) listener(p *gatewayPort) (*listenerv3.Listener, error) {
	ip := p.bind
	if ip == "" {
		ip = "0.0.0.0"
	}
	name := ip + "_" + strconv.FormatUint(uint64(p.number), 10)
	l := &listenerv3.Listener{
		Name:             name,
		Address:          socketAddress(ip, p.number),
		BindToPort:       wrapperspb.Bool(true),
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
	}
	sharedHTTP := false
	for _, s := range p.servers {
		var chains []*listenerv3.FilterChain
		var err error
		switch s.kind {
		case serverHTTP:
			if sharedHTTP {
				continue // the port's HTTP servers share one chain and one RDS
			}
			sharedHTTP = true
			chains, err = b.httpChain(s, "outbound_"+name, nil)
		case serverHTTPS:
			prefix := s.spec.GetName()
			if prefix == "" {
				prefix = "outbound_" + name
			}
			chains, err = b.httpChain(s, prefix, serverNameMatch(sniHosts(s)))
		case serverTLS, serverTCP:
			chains, err = b.tcpChain(s, p.number)
		case serverPassthrough:
			chains, err = b.passthroughChains(s, p.number)
		}
		if err != nil {
			return nil, fmt.Errorf("Gateway %s port %d: %w", s.gateway, p.number, err)
		}
		l.FilterChains = append(l.FilterChains, chains...)
	}
	if !p.plaintext {
		inspector, err := anypb.New(&tlsinspectorv3.TlsInspector{})
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name: tlsInspectorFilter, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}}
	}
	return l, nil
}

// httpChain is an HTTP connection manager taking its routes over RDS, with the
// server's TLS context when it terminates TLS. Like istiod's gateways, it
// trusts the client address it sees and sanitizes client certificate headers.
func (b *gatewayBuild) httpChain(s *gatewayServer, statPrefix string, match *listenerv3.FilterChainMatch) ([]*listenerv3.FilterChain, error) {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: s.route, ConfigSource: adsConfigSource(),
		}},
		UseRemoteAddress:         wrapperspb.Bool(true),
		ForwardClientCertDetails: hcmv3.HttpConnectionManager_SANITIZE_SET,
		SetCurrentClientCertDetails: &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Cert: true, Dns: true, Uri: true,
		},
	}
	chain, err := hcmChain(hcm)
	if err != nil {
		return nil, err
	}
	chain.FilterChainMatch = match
	if s.kind == serverHTTPS {
		if chain.TransportSocket, err = serverTLSContext(s.spec.GetTls()); err != nil {
			return nil, err
		}
	}
	return []*listenerv3.FilterChain{chain}, nil
}

// serverTLSContext terminates TLS for a server: ISTIO_MUTUAL with the mesh
// certificate, otherwise with the credentialName's certificate from SDS over
// ADS, and for MUTUAL the client CA from NAME-cacert, as istiod does.
func serverTLSContext(t *networking.ServerTLSSettings) (*corev3.TransportSocket, error) {
	if t.GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL {
		return DownstreamMTLS()
	}
	names := t.GetCredentialNames()
	if len(names) == 0 {
		names = []string{t.GetCredentialName()}
	}
	common := &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2", "http/1.1"}}
	for _, n := range names {
		common.TlsCertificateSdsSecretConfigs = append(common.TlsCertificateSdsSecretConfigs,
			&tlsv3.SdsSecretConfig{Name: GatewaySecretName(n), SdsConfig: adsConfigSource()})
	}
	mutual := t.GetMode() == networking.ServerTLSSettings_MUTUAL
	if mutual || t.GetMode() == networking.ServerTLSSettings_OPTIONAL_MUTUAL {
		def := &tlsv3.CertificateValidationContext{
			VerifyCertificateSpki: t.GetVerifyCertificateSpki(),
			VerifyCertificateHash: t.GetVerifyCertificateHash(),
		}
		// Istio's subjectAltNames say no type; a client may carry them as
		// DNS names or URIs (SPIFFE IDs), so either matches.
		for _, san := range t.GetSubjectAltNames() {
			for _, typ := range []tlsv3.SubjectAltNameMatcher_SanType{tlsv3.SubjectAltNameMatcher_DNS, tlsv3.SubjectAltNameMatcher_URI} {
				def.MatchTypedSubjectAltNames = append(def.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
					SanType: typ,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}},
				})
			}
		}
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext: def,
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{
					Name: GatewaySecretName(names[0]) + caSuffix, SdsConfig: adsConfigSource(),
				},
			},
		}
	}
	if t.GetMinProtocolVersion() != networking.ServerTLSSettings_TLS_AUTO || t.GetMaxProtocolVersion() != networking.ServerTLSSettings_TLS_AUTO ||
		len(t.GetCipherSuites()) > 0 {
		// The two enums list the same versions in the same order.
		common.TlsParams = &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TlsProtocol(t.GetMinProtocolVersion()),
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TlsProtocol(t.GetMaxProtocolVersion()),
			CipherSuites:              t.GetCipherSuites(),
		}
	}
	return transportSocket(&tlsv3.DownstreamTlsContext{
		CommonTlsContext:         common,
		RequireClientCertificate: wrapperspb.Bool(mutual),
	})
}
