package scope

import (
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

func dependsFixture() []*config.Resource {
	return []*config.Resource{
		kubeSvc("a", "s1", ""), // selects app=s1
		kubeSvc("istio-system", "istiod", ""),
		kubeSvc("b", "s2", ""),
		virtualService("a", "vs-s1", []string{"s1"}, nil, nil),
		virtualService("b", "vs-s2", []string{"s2"}, nil, nil),
		destRule("a", "dr-s1", "s1"),
		destRule("b", "dr-s2", "s2"),
		workloadEntry("a", "we-s1", map[string]string{"app": "s1"}),
		workloadEntry("a", "we-other", map[string]string{"app": "zzz"}),
		workloadEntry("b", "we-s2", map[string]string{"app": "s2"}),
		sidecarRes("a", "sc", 0, nil, "./*", "istio-system/*"),
		sidecarRes("a", "other-sc", 0, map[string]string{"app": "other"}, "*/*"),
		gatewayRes("a", "gw", nil),
	}
}

func TestDependsOn(t *testing.T) {
	sc := NewIndex(Input{Resources: dependsFixture()}).For(sidecarProxy("a", map[string]string{"app": "web"}))
	if sc.Sidecar.Meta.Name != "sc" {
		t.Fatalf("fixture: applied Sidecar %s", sc.ID())
	}
	cases := []struct {
		name string
		key  config.Key
		want bool
	}{
		{"imported Service", key(config.KindService, "a", "s1"), true},
		{"Service not imported", key(config.KindService, "b", "s2"), false},
		{"imported service by istiod's hostname key", key(config.KindServiceEntry, "a", host("s1", "a")), true},
		{"hostname key of a service not imported", key(config.KindServiceEntry, "b", host("s2", "b")), false},
		{"imported VirtualService", key(config.KindVirtualService, "a", "vs-s1"), true},
		{"VirtualService in a namespace not imported", key(config.KindVirtualService, "b", "vs-s2"), false},
		{"imported DestinationRule", key(config.KindDestinationRule, "a", "dr-s1"), true},
		{"DestinationRule of a service not imported", key(config.KindDestinationRule, "b", "dr-s2"), false},
		{"the scope's own Sidecar", key(config.KindSidecar, "a", "sc"), true},
		{"another Sidecar in the namespace", key(config.KindSidecar, "a", "other-sc"), false},
		{"a Sidecar elsewhere", key(config.KindSidecar, "b", "sc"), false},
		{"PeerAuthentication in the root namespace", key(config.KindPeerAuthentication, "istio-system", "default"), true},
		{"PeerAuthentication in the proxy's namespace", key(config.KindPeerAuthentication, "a", "strict"), true},
		{"PeerAuthentication elsewhere", key(config.KindPeerAuthentication, "b", "strict"), false},
		{"WorkloadEntry selected by an imported service", key(config.KindWorkloadEntry, "a", "we-s1"), true},
		{"WorkloadEntry nothing imported selects", key(config.KindWorkloadEntry, "a", "we-other"), false},
		{"WorkloadEntry unknown to the snapshot, imported selector in its namespace", key(config.KindWorkloadEntry, "a", "gone"), true},
		{"WorkloadEntry behind a service not imported", key(config.KindWorkloadEntry, "b", "we-s2"), false},
		{"the proxy's Namespace", key(config.KindNamespace, "", "a"), true},
		{"the root Namespace", key(config.KindNamespace, "", "istio-system"), true},
		{"an unrelated Namespace", key(config.KindNamespace, "", "b"), false},
		{"Gateway, for a sidecar", key(config.KindGateway, "a", "gw"), false},
		{"kind the scope does not know", key("EnvoyFilter", "b", "x"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sc.DependsOn(c.key); got != c.want {
				t.Errorf("DependsOn(%s) = %v, want %v", c.key, got, c.want)
			}
		})
	}
	if !sc.DependsOnHost(host("istiod", "istio-system")) || sc.DependsOnHost(host("s2", "b")) {
		t.Errorf("DependsOnHost")
	}
	if !sc.DependsOnAny(nil) {
		t.Errorf("a global push (no keys) must concern every scope")
	}
	var none *SidecarScope
	if !none.DependsOn(key(config.KindVirtualService, "b", "vs-s2")) || !none.DependsOnHost("x") {
		t.Errorf("a nil scope must depend on everything")
	}
	if len(sc.Dependencies()) == 0 {
		t.Errorf("Dependencies empty")
	}
}

// TestNeedsPushAcrossSnapshots follows istiod: a change is checked against the
// proxy's scope before and after it, which catches a Sidecar that starts or
// stops applying and deleted objects.
func TestNeedsPushAcrossSnapshots(t *testing.T) {
	base := []*config.Resource{kubeSvc("a", "s1", ""), kubeSvc("b", "s2", ""), virtualService("b", "vs-s2", []string{"s2"}, nil, nil)}
	p := sidecarProxy("a", map[string]string{"app": "web"})
	q := sidecarProxy("b", nil)
	newSidecar := sidecarRes("a", "new", 0, nil, "./*")
	forOther := sidecarRes("a", "db-only", 0, map[string]string{"app": "db"}, "./*")

	before := NewIndex(Input{Resources: base})
	after := NewIndex(Input{Resources: append(append([]*config.Resource{}, base...), newSidecar, forOther)})
	created := map[config.Key]struct{}{newSidecar.Key(): {}}
	if !NeedsPush(before.For(p), after.For(p), created) {
		t.Errorf("a Sidecar that now applies must push")
	}
	if before.For(p).DependsOn(newSidecar.Key()) {
		t.Errorf("the old default scope cannot know the new Sidecar")
	}
	if NeedsPush(before.For(q), after.For(q), created) {
		t.Errorf("a Sidecar in another namespace must not push")
	}
	if NeedsPush(before.For(p), after.For(p), map[config.Key]struct{}{forOther.Key(): {}}) {
		t.Errorf("a Sidecar selecting other workloads must not push")
	}
	deleted := map[config.Key]struct{}{newSidecar.Key(): {}}
	if !NeedsPush(after.For(p), before.For(p), deleted) {
		t.Errorf("deleting the applied Sidecar must push")
	}

	// Deleting a VirtualService p imported is only visible in the old scope.
	vsGone := map[config.Key]struct{}{key(config.KindVirtualService, "b", "vs-s2"): {}}
	without := NewIndex(Input{Resources: base[:2]})
	if without.For(p).DependsOnAny(vsGone) || !NeedsPush(before.For(p), without.For(p), vsGone) {
		t.Errorf("deleted VirtualService: only the previous scope depends on it")
	}
	// After the Sidecar narrowed p to its namespace, b's route no longer matters.
	if NeedsPush(after.For(p), after.For(p), vsGone) {
		t.Errorf("VirtualService outside the Sidecar's imports must not push")
	}
	if !NeedsPush(nil, nil, vsGone) || !NeedsPush(nil, after.For(p), nil) {
		t.Errorf("nil scope or global push must push")
	}
}

func TestGatewayScope(t *testing.T) {
	ingress := map[string]string{"istio": "ingressgateway"}
	rs := []*config.Resource{
		gatewayRes("istio-system", "ingress", ingress),
		gatewayRes("shop", "shop-gw", map[string]string{"istio": "ingressgateway"}),
		gatewayRes("other", "egress", map[string]string{"istio": "egressgateway"}),
		virtualService("shop", "routes", []string{"shop.example.com"}, []string{"shop-gw"}, nil, "cart"),
		virtualService("shop", "via-root", []string{"api.example.com"}, []string{"istio-system/ingress"}, nil, "orders"),
		virtualService("shop", "mesh-only", []string{"cart"}, nil, nil),
		virtualService("shop", "private", []string{"x.example.com"}, []string{"shop-gw"}, []string{"."}),
		virtualService("other", "egress-routes", []string{"ext.example.com"}, []string{"egress"}, nil),
		kubeSvc("shop", "cart", ""), kubeSvc("shop", "orders", ""), kubeSvc("shop", "stock", ""),
		kubeSvc("b", "hidden", "."),
		destRule("shop", "dr-cart", "cart"),
		sidecarRes("istio-system", "mesh-default", 0, nil, "./*"),
	}
	gw := &model.Proxy{Type: model.Router, Namespace: "istio-system", Labels: map[string]string{"istio": "ingressgateway", "pod": "1"}}
	gw2 := &model.Proxy{Type: model.Router, Namespace: "istio-system", Labels: map[string]string{"istio": "ingressgateway", "pod": "2"}}
	egress := &model.Proxy{Type: model.Router, Namespace: "istio-system", Labels: map[string]string{"istio": "egressgateway"}}

	ix := NewIndex(Input{Resources: rs})
	sc := ix.For(gw)
	if sc != ix.For(gw2) || sc == ix.For(egress) {
		t.Errorf("gateway scopes: shared by the same Gateways only (%s, %s)", sc.ID(), ix.For(egress).ID())
	}
	if got := names(sc.Gateways); got != "istio-system/ingress shop/shop-gw" {
		t.Errorf("Gateways %q", got)
	}
	if got := names(sc.VirtualServices()); got != "shop/routes shop/via-root" {
		t.Errorf("VirtualServices %q", got)
	}
	wantSvc := host("cart", "shop") + " " + host("orders", "shop") + " " + host("stock", "shop")
	if got := hostnames(sc.Services()); got != wantSvc {
		t.Errorf("services %q, want %q", got, wantSvc)
	}
	checks := []struct {
		key  config.Key
		want bool
	}{
		{key(config.KindGateway, "shop", "shop-gw"), true},
		{key(config.KindGateway, "other", "egress"), false},
		{key(config.KindVirtualService, "shop", "routes"), true},
		{key(config.KindVirtualService, "shop", "mesh-only"), false},
		{key(config.KindVirtualService, "other", "egress-routes"), false},
		{key(config.KindService, "shop", "stock"), true},
		{key(config.KindService, "b", "hidden"), false},
		{key(config.KindDestinationRule, "shop", "dr-cart"), true},
		{key(config.KindSidecar, "istio-system", "mesh-default"), false},
	}
	for _, c := range checks {
		if got := sc.DependsOn(c.key); got != c.want {
			t.Errorf("gateway DependsOn(%s) = %v, want %v", c.key, got, c.want)
		}
	}

	filtered := NewIndex(Input{Resources: rs, FilterGatewayClusterConfig: true}).For(gw)
	if got := hostnames(filtered.Services()); got != host("cart", "shop")+" "+host("orders", "shop") {
		t.Errorf("with FilterGatewayClusterConfig, services %q", got)
	}
	if filtered.DependsOn(key(config.KindService, "shop", "stock")) {
		t.Errorf("with FilterGatewayClusterConfig, an unrouted service must not push")
	}
}
