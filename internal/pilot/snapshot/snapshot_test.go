package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

const meshWideSidecar = `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress:
  - hosts: ["./*", "istio-system/*"]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
`

func proxy(ns, pod string, labels map[string]string) *model.Proxy {
	return &model.Proxy{ID: "sidecar~10.0.0.1~" + pod + "." + ns + "~" + ns + ".svc.cluster.local",
		Type: model.Sidecar, Namespace: ns, PodName: pod, Labels: labels, ServiceAccount: "sa-" + pod,
		IPAddresses: []string{"10.0.0.1"}}
}

// build decodes the fixture (plus extra YAML), registers proxies and builds a
// snapshot.
func build(t *testing.T, extra string, proxies ...*model.Proxy) *Snapshot {
	t.Helper()
	data, err := os.ReadFile("testdata/mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := config.Decode("mesh.yaml", append(data, []byte("\n---\n"+extra)...))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Options{}, func(registry.InboundType, *model.PushRequest) {})
	for _, r := range rs {
		reg.Update(nil, r)
	}
	for _, p := range proxies {
		reg.ProxyConnected(p)
	}
	authority, err := ca.Open(t.TempDir(), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	return Build(Input{Version: "1", Resources: rs, Registry: reg.Snapshot(), CA: authority})
}

func names(rs []Resource) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		out[r.Name] = true
	}
	return out
}

func TestProxiesOfOneScopeShareEncodedConfig(t *testing.T) {
	a := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	b := proxy("shop", "cart-2", map[string]string{"app": "cart", "version": "v1"})
	s := build(t, "", a, b)
	ca, err := s.Generate(a, ClusterType, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := s.Generate(b, ClusterType, nil)
	shared := 0
	for i := range ca {
		if ca[i].Body == cb[i].Body {
			shared++
		}
	}
	// Everything outbound is shared (the same encoded bytes); the inbound
	// clusters are per proxy.
	if shared < len(ca)-2 {
		t.Errorf("only %d of %d clusters shared between two proxies of one scope", shared, len(ca))
	}
	got := names(ca)
	for _, want := range []string{"outbound|80||cart.shop.svc.cluster.local", "outbound|80|v1|cart.shop.svc.cluster.local",
		"outbound|9000||payments.shop.svc.cluster.local", "outbound|80||ledger.finance.svc.cluster.local", "inbound|8080||"} {
		if !got[want] {
			t.Errorf("cluster %s missing from %v", want, got)
		}
	}
}

func TestMeshWideSidecarScopesConfig(t *testing.T) {
	p := proxy("shop", "cart-1", map[string]string{"app": "cart"})
	s := build(t, meshWideSidecar, p)
	got, err := s.Generate(p, ClusterType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if names(got)["outbound|80||ledger.finance.svc.cluster.local"] {
		t.Error("a service of another namespace was imported past the mesh-wide Sidecar")
	}
	if !names(got)["outbound|80||cart.shop.svc.cluster.local"] {
		t.Error("the proxy's own namespace was not imported")
	}
	ls, err := s.Generate(p, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var outbound listenerv3.Listener
	if err := ls[0].Body.UnmarshalTo(&outbound); err != nil || outbound.Name != "virtualOutbound" {
		t.Fatalf("first listener %q: %v", outbound.Name, err)
	}
	if tcp := outbound.FilterChains[0].Name; tcp != "virtualOutbound-catchall-tcp" {
		t.Fatal(tcp)
	}
	if !contains(ls[0].Body.Value, "BlackHoleCluster") {
		t.Error("REGISTRY_ONLY should send unknown destinations to the BlackHoleCluster")
	}
}

func TestEndpointsAndSecretsAndStrictInbound(t *testing.T) {
	a := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	s := build(t, "", a)
	eps, err := s.Generate(a, EndpointType, []string{"outbound|80|v1|cart.shop.svc.cluster.local", "no-such-cluster"})
	if err != nil || len(eps) != 1 {
		t.Fatalf("%d load assignments, %v", len(eps), err)
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := eps[0].Body.UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	if n := len(cla.Endpoints[0].LbEndpoints); n != 1 || cla.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().GetPortValue() != 8080 {
		t.Errorf("endpoints %v", cla.Endpoints)
	}
	secrets, err := s.Generate(a, SecretType, nil)
	if err != nil || len(secrets) != 2 {
		t.Fatalf("%d secrets, %v", len(secrets), err)
	}
	var cert tlsv3.Secret
	if err := secrets[0].Body.UnmarshalTo(&cert); err != nil || cert.Name != "default" || cert.GetTlsCertificate() == nil {
		t.Errorf("workload secret %v %v", cert.Name, err)
	}
	ls, err := s.Generate(a, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inbound listenerv3.Listener
	if err := ls[len(ls)-1].Body.UnmarshalTo(&inbound); err != nil || inbound.Name != "virtualInbound" {
		t.Fatalf("%v %v", inbound.Name, err)
	}
	// STRICT in the namespace: the served port only takes mTLS.
	if c := inbound.FilterChains[0]; c.FilterChainMatch.GetDestinationPort().GetValue() != 8080 || c.TransportSocket == nil || len(inbound.FilterChains) != 2 {
		t.Errorf("inbound chains %d, first %v", len(inbound.FilterChains), c.FilterChainMatch)
	}
}

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

func TestPortLevelPeerAuthenticationAndMergedDestinationRules(t *testing.T) {
	a := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	s := build(t, `
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: cart, namespace: shop}
spec:
  selector: {matchLabels: {app: cart}}
  portLevelMtls:
    8080: {mode: DISABLE}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart-more, namespace: shop}
spec:
  host: cart.shop.svc.cluster.local
  subsets:
  - {name: v1, labels: {version: other}}
  - {name: v3, labels: {version: v3}}
`, a)
	ls, err := s.Generate(a, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inbound listenerv3.Listener
	if err := ls[len(ls)-1].Body.UnmarshalTo(&inbound); err != nil {
		t.Fatal(err)
	}
	// The namespace is STRICT, but the workload's policy disables mTLS on 8080.
	if c := inbound.FilterChains[0]; c.FilterChainMatch.GetDestinationPort().GetValue() != 8080 || c.TransportSocket != nil {
		t.Errorf("port 8080 should be plain text under its port-level DISABLE: %v", c.FilterChainMatch)
	}
	cs, err := s.Generate(a, ClusterType, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := names(cs)
	// Subsets of both rules; the older rule's v1 wins over the newer one's.
	if !got["outbound|80|v1|cart.shop.svc.cluster.local"] || !got["outbound|80|v3|cart.shop.svc.cluster.local"] {
		t.Errorf("merged subsets missing: %v", got)
	}
	eps, _ := s.Generate(a, EndpointType, []string{"outbound|80|v1|cart.shop.svc.cluster.local"})
	var cla endpointv3.ClusterLoadAssignment
	if err := eps[0].Body.UnmarshalTo(&cla); err != nil || len(cla.Endpoints) != 1 {
		t.Errorf("subset v1 should keep the first rule's labels (version: v1) and select the proxy: %v %v", cla.Endpoints, err)
	}
}

// Regression test for every namespace's scope generating and encoding its
// own copy of every cluster on each push (100 namespaces: 10,100 clusters
// per push where 101 differ), which made the push stage ten times
// istiod's: a cluster depends only on its service and the rules applied to
// it, so scopes that import a service under the same rules share its bytes,
// and a scope whose own namespace has a rule for the host gets its own.
func TestClustersSharedAcrossScopesOfOneSnapshot(t *testing.T) {
	const financeRule = `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart-from-finance, namespace: finance}
spec:
  host: cart.shop.svc.cluster.local
  subsets: [{name: canary, labels: {track: canary}}]
`
	shop := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	finance := proxy("finance", "ledger-1", map[string]string{"app": "ledger"})
	other := proxy("payroll", "payroll-1", map[string]string{"app": "payroll"})
	s := build(t, financeRule+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: payroll}\n", shop, finance, other)
	if s.Scopes.For(shop) == s.Scopes.For(other) {
		t.Fatal("the test needs the proxies in different scopes")
	}
	bodies := func(p *model.Proxy) map[string]Resource { return generatedByName(t, s, p, ClusterType) }
	inShop, inFinance, inPayroll := bodies(shop), bodies(finance), bodies(other)
	for _, name := range []string{"BlackHoleCluster", "PassthroughCluster", "outbound|80||ledger.finance.svc.cluster.local",
		"outbound|80||cart.shop.svc.cluster.local", "outbound|80|v1|cart.shop.svc.cluster.local", "outbound|9000||payments.shop.svc.cluster.local"} {
		if inShop[name].Body == nil || inShop[name].Body != inPayroll[name].Body {
			t.Errorf("%s: shop's and payroll's scopes import it under the same rules but do not share its encoding", name)
		}
	}
	// finance's own rule for cart wins over shop's there: its cart
	// clusters are its own, with its own subset and without shop's.
	if inFinance["outbound|80||cart.shop.svc.cluster.local"].Body == inShop["outbound|80||cart.shop.svc.cluster.local"].Body {
		t.Error("cart under finance's rule shares the encoding of cart under shop's rule")
	}
	if inFinance["outbound|80|canary|cart.shop.svc.cluster.local"].Body == nil || inFinance["outbound|80|v1|cart.shop.svc.cluster.local"].Body != nil {
		t.Errorf("finance's cart clusters are not those of finance's rule: %v", names(mapValues(inFinance)))
	}
	if inFinance["outbound|80||ledger.finance.svc.cluster.local"].Body != inShop["outbound|80||ledger.finance.svc.cluster.local"].Body {
		t.Error("ledger, under no rule anywhere, is not shared between finance's and shop's scopes")
	}
}

// generatedByName is p's generated resources of typeURL (all of them), by
// name.
func generatedByName(t *testing.T, s *Snapshot, p *model.Proxy, typeURL string) map[string]Resource {
	t.Helper()
	rs, err := s.Generate(p, typeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Resource{}
	for _, r := range rs {
		out[r.Name] = r
	}
	return out
}

func mapValues(m map[string]Resource) []Resource {
	out := make([]Resource, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// Virtual hosts are shared between namespaces' route configurations too;
// what tells them apart must stay apart: a service's short name resolves
// only in its own namespace.
func TestSharedVirtualHostsKeepShortNamesLocal(t *testing.T) {
	shop := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	finance := proxy("finance", "ledger-1", map[string]string{"app": "ledger"})
	s := build(t, "", shop, finance)
	domains := func(p *model.Proxy) map[string]bool {
		rs, err := s.Generate(p, RouteType, []string{"80"})
		if err != nil || len(rs) != 1 {
			t.Fatalf("routes of %s: %v %v", p.Namespace, rs, err)
		}
		var rc routev3.RouteConfiguration
		if err := rs[0].Body.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, vh := range rc.VirtualHosts {
			for _, d := range vh.Domains {
				out[d] = true
			}
		}
		return out
	}
	inShop, inFinance := domains(shop), domains(finance)
	if !inShop["cart"] || inFinance["cart"] {
		t.Errorf("short name cart: in shop's routes %v (want true), in finance's %v (want false)", inShop["cart"], inFinance["cart"])
	}
	if !inFinance["ledger"] || inShop["ledger"] {
		t.Errorf("short name ledger: in finance's routes %v (want true), in shop's %v (want false)", inFinance["ledger"], inShop["ledger"])
	}
	if !inShop["ledger.finance"] || !inFinance["cart.shop"] {
		t.Error("a namespace-qualified name is missing")
	}
}

// A route configuration spliced from shared virtual hosts' bytes is what
// encoding it whole makes, byte for byte (delta versions are checksums of
// them).
func TestSplicedRoutesEncodeAsAWhole(t *testing.T) {
	shop := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	finance := proxy("finance", "ledger-1", map[string]string{"app": "ledger"})
	s := build(t, "", shop, finance)
	for _, p := range []*model.Proxy{shop, finance} {
		rs, err := s.Generate(p, RouteType, nil)
		if err != nil || len(rs) == 0 {
			t.Fatalf("routes of %s: %v %v", p.Namespace, rs, err)
		}
		for _, r := range rs {
			var rc routev3.RouteConfiguration
			if err := r.Body.UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			whole, err := encode(rc.Name, &rc)
			if err != nil {
				t.Fatal(err)
			}
			if whole.Body.TypeUrl != r.Body.TypeUrl || !bytes.Equal(whole.Body.Value, r.Body.Value) {
				t.Errorf("%s's route %s: spliced %d bytes differ from encoding it whole (%d bytes)", p.Namespace, rc.Name, len(r.Body.Value), len(whole.Body.Value))
			}
			if len(rc.VirtualHosts) < 2 { // a service's and the catch-all
				t.Errorf("%s's route %s has %d virtual hosts", p.Namespace, rc.Name, len(rc.VirtualHosts))
			}
		}
	}
}

// Encoding a scope's route configuration costs the scope its own few
// fields, not a copy of the shared virtual hosts it splices in: their
// number must not change its allocations. Before, the configuration was
// cloned whole, hosts and all, to encode the fields after them, and the
// value grew host by host, copied at each growth.
func TestSplicedRoutesDoNotCopySharedHosts(t *testing.T) {
	s := build(t, "")
	allocs := func(hosts int) float64 {
		rc := &routev3.RouteConfiguration{Name: "80", ValidateClusters: wrapperspb.Bool(false)}
		for i := range hosts {
			host := fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local", i, i)
			key := generate.VirtualHostKey{Service: &model.Service{Hostname: host}, Port: 80}
			vh, err := s.virtualHost(key, func() (*routev3.VirtualHost, error) {
				return &routev3.VirtualHost{Name: host + ":80", Domains: []string{host, host + ":80"},
					Routes: []*routev3.Route{{Name: "default", Match: &routev3.RouteMatch{
						PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}}}}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
		if _, err := s.encodeRoutes(rc); err != nil { // the hosts' bytes, once
			t.Fatal(err)
		}
		return testing.AllocsPerRun(20, func() {
			if _, err := s.encodeRoutes(rc); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(2), allocs(200)
	if many != few {
		t.Errorf("encoding a route configuration with 200 shared hosts takes %.0f allocations, with 2 %.0f: the hosts are copied or the value regrown", many, few)
	}
}

// Proxies whose workloads serve the same ports under the same mTLS modes
// share one encoding of their inbound clusters and listener; a mode or a
// port that differs keeps its own.
func TestInboundConfigSharedByPortsAndModes(t *testing.T) {
	const payrollCart = `
apiVersion: v1
kind: Namespace
metadata: {name: payroll}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: payroll}
spec:
  selector: {app: cart}
  ports: [{name: http, port: 80, targetPort: 8080}]
`
	cart1 := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	cart2 := proxy("shop", "cart-2", map[string]string{"app": "cart", "version": "v2"})
	permissive := proxy("payroll", "cart-1", map[string]string{"app": "cart"}) // same port, no STRICT policy
	ledger := proxy("finance", "ledger-1", map[string]string{"app": "ledger"}) // port 80
	s := build(t, payrollCart, cart1, cart2, permissive, ledger)
	inbound := func(p *model.Proxy, typeURL, name string) Resource {
		r, ok := generatedByName(t, s, p, typeURL)[name]
		if !ok {
			t.Fatalf("%s in %s: no %s", p.PodName, p.Namespace, name)
		}
		return r
	}
	listener := func(p *model.Proxy) Resource { return inbound(p, ListenerType, "virtualInbound") }
	cluster := func(p *model.Proxy) Resource { return inbound(p, ClusterType, "inbound|8080||") }
	if listener(cart1).Body != listener(cart2).Body || cluster(cart1).Body != cluster(cart2).Body {
		t.Error("two replicas of cart do not share their inbound config's encoding")
	}
	if listener(cart1).Body == listener(permissive).Body || bytes.Equal(listener(cart1).Body.Value, listener(permissive).Body.Value) {
		t.Error("a STRICT and a PERMISSIVE workload share an inbound listener")
	}
	if cluster(cart1).Body != cluster(permissive).Body {
		t.Error("the inbound clusters of the same port, which mTLS does not change, are not shared")
	}
	if listener(ledger).Body == listener(cart1).Body || listener(ledger).Body == listener(permissive).Body {
		t.Error("workloads serving different ports share an inbound listener")
	}
}

// A proxy's clusters go out first in a push, so making them must not wait
// for its scope's listeners and routes: those are made on the first LDS or
// RDS, once for the scope.
func TestScopeClustersMadeWithoutListenersAndRoutes(t *testing.T) {
	shop := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	s := build(t, "", shop)
	if _, err := s.Generate(shop, ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	out := s.outbound[s.Scopes.For(shop).ID()]
	if out == nil || len(out.clusters) == 0 {
		t.Fatal("no clusters cached for the scope")
	}
	if out.listeners != nil || out.routes != nil {
		t.Fatalf("generating clusters also made %d listeners and %d routes", len(out.listeners), len(out.routes))
	}
	ls, err := s.Generate(shop, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Generate(shop, RouteType, nil)
	if err != nil || len(rs) == 0 {
		t.Fatalf("routes %v %v", rs, err)
	}
	if len(out.listeners) == 0 || len(ls) != len(out.listeners)+1 { // and the inbound listener
		t.Errorf("%d listeners sent, %d outbound cached", len(ls), len(out.listeners))
	}
}

// Outbound listeners, like clusters, are made once for every scope that
// has them: two namespaces' scopes importing the same services send the
// same encoded listeners.
func TestOutboundListenersSharedAcrossScopes(t *testing.T) {
	shop := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	other := proxy("payroll", "payroll-1", map[string]string{"app": "payroll"})
	s := build(t, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: payroll}\n", shop, other)
	if s.Scopes.For(shop) == s.Scopes.For(other) {
		t.Fatal("the test needs the proxies in different scopes")
	}
	inShop, inPayroll := generatedByName(t, s, shop, ListenerType), generatedByName(t, s, other, ListenerType)
	for _, name := range []string{"virtualOutbound", "0.0.0.0_80", "0.0.0.0_9000"} {
		if inShop[name].Body == nil || inShop[name].Body != inPayroll[name].Body {
			t.Errorf("%s: shop's and payroll's scopes both have it but do not share its encoding", name)
		}
	}
}
