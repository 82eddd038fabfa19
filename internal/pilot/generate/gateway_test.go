package generate

import (
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

func server(name string, port uint32, proto string, tls *networking.ServerTLSSettings, hosts ...string) *networking.Server {
	return &networking.Server{Port: &networking.Port{Number: port, Name: name, Protocol: proto}, Hosts: hosts, Tls: tls}
}

func dest(host, subset string, port uint32, weight int32) *networking.HTTPRouteDestination {
	d := &networking.HTTPRouteDestination{Destination: &networking.Destination{Host: host, Subset: subset}, Weight: weight}
	if port != 0 {
		d.Destination.Port = &networking.PortSelector{Number: port}
	}
	return d
}

func svc(ns, name string, ports ...model.ServicePort) *model.Service {
	return &model.Service{Key: config.Key{Kind: config.KindService, Namespace: ns, Name: name},
		Hostname: name + "." + ns + ".svc.cluster.local", Namespace: ns, Ports: ports}
}

// ingress is an ingress gateway in istio-system: HTTP on 80 for two hosts
// (and one no VirtualService routes), HTTPS with a credentialName and TLS
// passthrough sharing 443, and TCP on 31400.
func ingress() GatewayInput {
	gw := Gateway{Name: "ingress", Namespace: "istio-system", Spec: &networking.Gateway{
		Selector: map[string]string{"istio": "ingressgateway"},
		Servers: []*networking.Server{
			server("http", 80, "HTTP", nil, "*/bookinfo.example.com", "./api.example.com", "*/nothing.example.com"),
			server("https", 443, "HTTPS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_SIMPLE, CredentialName: "bookinfo-cert"},
				"*/bookinfo.example.com"),
			server("tls-passthrough", 443, "TLS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_PASSTHROUGH},
				"secure/*.secure.example.com"),
			server("tcp", 31400, "TCP", nil, "*/*"),
		},
	}}
	bookinfo := BoundVirtualService{Namespace: "bookinfo", Spec: &networking.VirtualService{
		Hosts: []string{"bookinfo.example.com"}, Gateways: []string{"istio-system/ingress"},
		Http: []*networking.HTTPRoute{
			{Name: "default", Route: []*networking.HTTPRouteDestination{dest("productpage", "v1", 9080, 0)}},
			{
				Name:  "reviews",
				Match: []*networking.HTTPMatchRequest{{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/reviews"}}}},
				Route: []*networking.HTTPRouteDestination{dest("reviews", "v2", 0, 0)}, // the port comes from the service
			},
		},
	}}
	api := BoundVirtualService{Namespace: "istio-system", Spec: &networking.VirtualService{
		Hosts: []string{"api.example.com"}, Gateways: []string{"ingress"},
		Http: []*networking.HTTPRoute{{Name: "split", Route: []*networking.HTTPRouteDestination{
			dest("reviews.bookinfo.svc.cluster.local", "v1", 0, 90), dest("reviews.bookinfo.svc.cluster.local", "v2", 0, 10),
		}}},
	}}
	// api.example.com is bound as ./api.example.com: only VirtualServices in
	// istio-system may route it, so this one must not.
	intruder := BoundVirtualService{Namespace: "bookinfo", Spec: &networking.VirtualService{
		Hosts: []string{"api.example.com"}, Gateways: []string{"istio-system/ingress"},
		Http: []*networking.HTTPRoute{{Name: "intruder", Route: []*networking.HTTPRouteDestination{dest("productpage", "", 9080, 0)}}},
	}}
	vault := BoundVirtualService{Namespace: "secure", Spec: &networking.VirtualService{
		Hosts: []string{"vault.secure.example.com"}, Gateways: []string{"istio-system/ingress"},
		Tls: []*networking.TLSRoute{{
			Match: []*networking.TLSMatchAttributes{{SniHosts: []string{"vault.secure.example.com"}}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "vault", Port: &networking.PortSelector{Number: 8200}}}},
		}},
	}}
	mysql := BoundVirtualService{Namespace: "db", Spec: &networking.VirtualService{
		Hosts: []string{"*"}, Gateways: []string{"istio-system/ingress"},
		Tcp: []*networking.TCPRoute{{
			Match: []*networking.L4MatchAttributes{{Port: 31400}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "mysql"}}},
		}},
	}}
	return GatewayInput{
		Gateways:        []Gateway{gw},
		VirtualServices: []BoundVirtualService{bookinfo, api, intruder, vault, mysql},
		Services: []*model.Service{
			svc("bookinfo", "productpage", model.ServicePort{Name: "http", Number: 9080, Protocol: "HTTP"}),
			svc("bookinfo", "reviews", model.ServicePort{Name: "http", Number: 9080, Protocol: "HTTP"}),
			svc("secure", "vault", model.ServicePort{Name: "tls", Number: 8200, Protocol: "TLS"}),
			svc("db", "mysql", model.ServicePort{Name: "tcp", Number: 3306, Protocol: "TCP"}),
		},
		DomainSuffix: "cluster.local",
	}
}

func buildIngress(t *testing.T, in GatewayInput) *GatewayResources {
	t.Helper()
	res, err := BuildGateway(in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGoldenGateway(t *testing.T) {
	res := buildIngress(t, ingress())
	if len(res.Skipped) != 0 {
		t.Errorf("skipped: %v", res.Skipped)
	}
	var msgs []proto.Message
	for _, l := range res.Listeners {
		msgs = append(msgs, l)
	}
	golden(t, "gateway-listeners", msgs...)
	msgs = nil
	for _, rc := range res.Routes {
		msgs = append(msgs, rc)
	}
	golden(t, "gateway-routes", msgs...)
}

func listenerNames(ls []*listenerv3.Listener) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func TestGatewayListenerPerPort(t *testing.T) {
	res := buildIngress(t, ingress())
	if got, want := listenerNames(res.Listeners), []string{"0.0.0.0_80", "0.0.0.0_443", "0.0.0.0_31400"}; !slices.Equal(got, want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
	for _, l := range res.Listeners {
		if !l.GetBindToPort().GetValue() || l.GetAddress().GetSocketAddress().GetPortValue() == 0 {
			t.Errorf("%s does not bind its port", l.Name)
		}
	}
	http := res.Listeners[0]
	if n := len(http.FilterChains); n != 1 {
		t.Fatalf("port 80 has %d chains, want 1", n)
	}
	if rds := hcmOf(t, http.FilterChains[0]).GetRds().GetRouteConfigName(); rds != "http.80" {
		t.Errorf("port 80 routes from %q, want http.80", rds)
	}
	if len(http.ListenerFilters) != 0 {
		t.Error("a plain-text port needs no TLS inspector")
	}

	// 443: the HTTPS server terminating with its credential, then the
	// passthrough server's SNI route.
	tls := res.Listeners[1]
	if n := len(tls.FilterChains); n != 2 || len(tls.ListenerFilters) != 1 {
		t.Fatalf("port 443 has %d chains and %d listener filters, want 2 and 1", n, len(tls.ListenerFilters))
	}
	https := tls.FilterChains[0]
	if names := https.GetFilterChainMatch().GetServerNames(); !slices.Equal(names, []string{"bookinfo.example.com"}) {
		t.Errorf("HTTPS chain matches SNI %v", names)
	}
	if rds := hcmOf(t, https).GetRds().GetRouteConfigName(); rds != "https.443.https.ingress.istio-system" {
		t.Errorf("HTTPS routes from %q", rds)
	}
	ctx := downstreamTLS(t, https)
	if sds := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(sds) != 1 || sds[0].Name != "kubernetes://bookinfo-cert" ||
		sds[0].GetSdsConfig().GetAds() == nil {
		t.Errorf("HTTPS certificate from %v, want kubernetes://bookinfo-cert over ADS", sds)
	}
	if ctx.GetRequireClientCertificate().GetValue() {
		t.Error("SIMPLE must not require a client certificate")
	}
	pass := tls.FilterChains[1]
	if names := pass.GetFilterChainMatch().GetServerNames(); !slices.Equal(names, []string{"vault.secure.example.com"}) || pass.TransportSocket != nil {
		t.Errorf("passthrough chain matches %v, terminates TLS: %v", names, pass.TransportSocket != nil)
	}
	if c := tcpCluster(t, pass); c != "outbound|8200||vault.secure.svc.cluster.local" {
		t.Errorf("passthrough goes to %s", c)
	}
	// 31400: the tcp route's destination, on its service's only port.
	if c := tcpCluster(t, res.Listeners[2].FilterChains[0]); c != "outbound|3306||mysql.db.svc.cluster.local" {
		t.Errorf("TCP goes to %s", c)
	}
}

func hcmOf(t *testing.T, c *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if len(c.Filters) != 1 || c.Filters[0].GetTypedConfig().UnmarshalTo(&hcm) != nil {
		t.Fatalf("chain %v is not an HTTP connection manager", c.Filters)
	}
	return &hcm
}

func tcpCluster(t *testing.T, c *listenerv3.FilterChain) string {
	t.Helper()
	var tp tcpproxyv3.TcpProxy
	if len(c.Filters) != 1 || c.Filters[0].GetTypedConfig().UnmarshalTo(&tp) != nil {
		t.Fatalf("chain %v is not a TCP proxy", c.Filters)
	}
	return tp.GetCluster()
}

func downstreamTLS(t *testing.T, c *listenerv3.FilterChain) *tlsv3.DownstreamTlsContext {
	t.Helper()
	var ctx tlsv3.DownstreamTlsContext
	if c.TransportSocket == nil || c.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx) != nil {
		t.Fatal("chain does not terminate TLS")
	}
	return &ctx
}

func routeConfig(t *testing.T, res *GatewayResources, name string) *routev3.RouteConfiguration {
	t.Helper()
	for _, rc := range res.Routes {
		if rc.Name == name {
			return rc
		}
	}
	t.Fatalf("no route config %s", name)
	return nil
}

func vhost(rc *routev3.RouteConfiguration, name string) *routev3.VirtualHost {
	for _, vh := range rc.VirtualHosts {
		if vh.Name == name {
			return vh
		}
	}
	return nil
}

func TestGatewayRoutes(t *testing.T) {
	res := buildIngress(t, ingress())
	var names []string
	for _, rc := range res.Routes {
		names = append(names, rc.Name)
	}
	if want := []string{"http.80", "https.443.https.ingress.istio-system"}; !slices.Equal(names, want) {
		t.Fatalf("route configs %v, want %v", names, want)
	}
	rc := routeConfig(t, res, "http.80")
	if len(rc.VirtualHosts) != 2 || vhost(rc, "nothing.example.com:80") != nil {
		t.Errorf("http.80 has virtual hosts %v; a host without a VirtualService must get none", rc.VirtualHosts)
	}
	bi := vhost(rc, "bookinfo.example.com:80")
	if bi == nil || !slices.Equal(bi.Domains, []string{"bookinfo.example.com", "bookinfo.example.com:80"}) {
		t.Fatalf("bookinfo virtual host %v", bi)
	}
	// The catch-all route goes last; the short destination takes its
	// service's only port.
	if len(bi.Routes) != 2 || bi.Routes[0].Name != "reviews" ||
		bi.Routes[0].GetRoute().GetCluster() != "outbound|9080|v2|reviews.bookinfo.svc.cluster.local" ||
		bi.Routes[1].GetRoute().GetCluster() != "outbound|9080|v1|productpage.bookinfo.svc.cluster.local" {
		t.Errorf("bookinfo routes %v", bi.Routes)
	}
	api := vhost(rc, "api.example.com:80")
	if api == nil || len(api.Routes) != 1 || api.Routes[0].Name != "split" {
		t.Fatalf("api.example.com must be routed by the istio-system VirtualService alone: %v", api)
	}
	if wc := api.Routes[0].GetRoute().GetWeightedClusters().GetClusters(); len(wc) != 2 || wc[1].Name != "outbound|9080|v2|reviews.bookinfo.svc.cluster.local" {
		t.Errorf("api split %v", wc)
	}
	https := routeConfig(t, res, "https.443.https.ingress.istio-system")
	if len(https.VirtualHosts) != 1 || https.VirtualHosts[0].Name != "bookinfo.example.com:443" {
		t.Errorf("HTTPS virtual hosts %v", https.VirtualHosts)
	}
}

func TestGatewayWithoutVirtualServices(t *testing.T) {
	in := ingress()
	in.VirtualServices = nil
	res := buildIngress(t, in)
	rc := routeConfig(t, res, "http.80")
	if len(rc.VirtualHosts) != 1 || rc.VirtualHosts[0].Name != "blackhole:80" || len(rc.VirtualHosts[0].Routes) != 0 {
		t.Errorf("http.80 without VirtualServices: %v, want the empty blackhole:80 host", rc.VirtualHosts)
	}
	// HTTP listeners stay (they answer 404); TCP ones have nothing to proxy to.
	if got := listenerNames(res.Listeners); !slices.Equal(got, []string{"0.0.0.0_80", "0.0.0.0_443"}) {
		t.Errorf("listeners %v", got)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "0.0.0.0_31400") {
		t.Errorf("skipped %v", res.Skipped)
	}
}

func TestGatewayServerConflicts(t *testing.T) {
	in := ingress()
	in.Gateways = append(in.Gateways, Gateway{Name: "other", Namespace: "default", Spec: &networking.Gateway{Servers: []*networking.Server{
		server("tcp-80", 80, "TCP", nil, "*/*"),                    // TCP cannot share an HTTP port
		server("http-more", 80, "HTTP", nil, "*/more.example.com"), // HTTP can
		server("https-dup", 443, "HTTPS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_SIMPLE, CredentialName: "x"},
			"*/bookinfo.example.com"), // the same SNI host twice
		server("tcp-2", 31400, "TCP", nil, "*/*"), // one TCP server a port
		server("files", 8443, "HTTPS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_SIMPLE}, "*/a.example.com"), // no credential
	}}})
	res := buildIngress(t, in)
	if len(res.Skipped) != 4 {
		t.Fatalf("skipped %d servers, want 4:\n%s", len(res.Skipped), strings.Join(res.Skipped, "\n"))
	}
	for i, want := range []string{"server 0", "server 2", "server 3", "server 4"} {
		if !strings.Contains(res.Skipped[i], "default/other "+want) {
			t.Errorf("skipped[%d] = %q, want %s", i, res.Skipped[i], want)
		}
	}
	if got := listenerNames(res.Listeners); !slices.Equal(got, []string{"0.0.0.0_80", "0.0.0.0_443", "0.0.0.0_31400"}) {
		t.Errorf("listeners %v", got)
	}
	if n := len(res.Listeners[0].FilterChains); n != 1 {
		t.Errorf("HTTP servers of one port must share a chain, got %d", n)
	}
}

func TestGatewayTLSModesAndRedirect(t *testing.T) {
	in := GatewayInput{DomainSuffix: "cluster.local", Gateways: []Gateway{{Name: "gw", Namespace: "edge", Spec: &networking.Gateway{Servers: []*networking.Server{
		server("http", 80, "HTTP", &networking.ServerTLSSettings{HttpsRedirect: true}, "*/shop.example.com"),
		server("mutual", 443, "HTTPS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_MUTUAL, CredentialName: "shop",
			SubjectAltNames: []string{"client.example.com"}}, "*/shop.example.com"),
		server("mesh", 15443, "TLS", &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_ISTIO_MUTUAL}, "*/*.local"),
	}}}}, VirtualServices: []BoundVirtualService{{Namespace: "edge", Spec: &networking.VirtualService{
		Hosts: []string{"*.cluster.local"}, Gateways: []string{"gw", "mesh"},
		Http: []*networking.HTTPRoute{{
			Name:  "mesh-only",
			Match: []*networking.HTTPMatchRequest{{Gateways: []string{"mesh"}}},
			Route: []*networking.HTTPRouteDestination{dest("a", "", 80, 0)},
		}},
		Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "db.edge.svc.cluster.local", Port: &networking.PortSelector{Number: 5432}}}}}},
	}}}}
	res := buildIngress(t, in)
	redirect := vhost(routeConfig(t, res, "http.80"), "shop.example.com:80")
	if redirect == nil || redirect.RequireTls != routev3.VirtualHost_ALL {
		t.Errorf("httpsRedirect host %v must require TLS", redirect)
	}
	ctx := downstreamTLS(t, res.Listeners[1].FilterChains[0])
	if !ctx.GetRequireClientCertificate().GetValue() ||
		ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != "kubernetes://shop-cacert" {
		t.Errorf("MUTUAL context %v", ctx)
	}
	mesh := res.Listeners[2].FilterChains[0]
	if sds := downstreamTLS(t, mesh).GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(sds) != 1 || sds[0].Name != WorkloadSecret {
		t.Errorf("ISTIO_MUTUAL must serve the workload certificate, got %v", sds)
	}
	if c := tcpCluster(t, mesh); c != "outbound|5432||db.edge.svc.cluster.local" {
		t.Errorf("ISTIO_MUTUAL TLS server proxies to %s", c)
	}
	// The only http route matches the mesh gateway alone, so the gateway's
	// route config for *.cluster.local gets nothing from it.
	for _, rc := range res.Routes {
		for _, vh := range rc.VirtualHosts {
			if len(vh.Routes) > 0 {
				t.Errorf("%s/%s has routes %v meant for sidecars", rc.Name, vh.Name, vh.Routes)
			}
		}
	}
}

func TestGatewayHostMatching(t *testing.T) {
	for _, tc := range []struct {
		server []string
		ns     string
		vs     []string
		want   []string
	}{
		{[]string{"*.example.com"}, "a", []string{"foo.example.com", "bar.example.com"}, []string{"foo.example.com", "bar.example.com"}},
		{[]string{"foo.example.com"}, "a", []string{"*.example.com"}, []string{"foo.example.com"}},
		{[]string{"*"}, "a", []string{"*.example.com"}, []string{"*.example.com"}},
		{[]string{"*.example.com"}, "a", []string{"*.b.example.com"}, []string{"*.b.example.com"}},
		{[]string{"a/foo.example.com"}, "a", []string{"foo.example.com"}, []string{"foo.example.com"}},
		{[]string{"b/foo.example.com"}, "a", []string{"foo.example.com"}, nil},
		{[]string{"foo.example.com"}, "a", []string{"example.com"}, nil},
		{[]string{"*.example.com"}, "a", []string{"example.com"}, nil},
	} {
		got := intersectHosts(hostsFor(tc.server, tc.ns), tc.vs)
		if !slices.Equal(got, tc.want) {
			t.Errorf("server %v (VirtualService in %s) with %v: %v, want %v", tc.server, tc.ns, tc.vs, got, tc.want)
		}
	}
}

func TestGatewaySecretName(t *testing.T) {
	for in, want := range map[string]string{"cert": "kubernetes://cert", "kubernetes://ns/cert": "kubernetes://ns/cert"} {
		if got := GatewaySecretName(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// A match that names the gateway is the gateway's, even though sidecars drop it
// (regression: the sidecar narrowing once sat in the shared route builder).
func TestGatewayKeepsMatchesNamingIt(t *testing.T) {
	in := GatewayInput{DomainSuffix: "cluster.local", Gateways: []Gateway{{Name: "gw", Namespace: "edge", Spec: &networking.Gateway{Servers: []*networking.Server{
		server("http", 80, "HTTP", nil, "*/shop.example.com"),
	}}}}, VirtualServices: []BoundVirtualService{{Namespace: "edge", Spec: &networking.VirtualService{
		Hosts: []string{"shop.example.com"}, Gateways: []string{"gw", "mesh"},
		Http: []*networking.HTTPRoute{{
			Name:  "edge-only",
			Match: []*networking.HTTPMatchRequest{{Gateways: []string{"gw"}}},
			Route: []*networking.HTTPRouteDestination{dest("a", "", 80, 0)},
		}},
	}}}}
	res := buildIngress(t, in)
	vh := vhost(routeConfig(t, res, "http.80"), "shop.example.com:80")
	if vh == nil || len(vh.Routes) != 1 || vh.Routes[0].Name != "edge-only" {
		t.Errorf("the gateway lost its own route: %v", vh)
	}
}
