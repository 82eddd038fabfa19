package scope

import (
	"fmt"
	"sync"
	"testing"

	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

func TestSidecarSelectionOrder(t *testing.T) {
	app := map[string]string{"app": "web", "version": "v1"}
	cases := []struct {
		name     string
		sidecars []*config.Resource
		proxy    *model.Proxy
		mesh     *meshconfig.MeshConfig
		want     string // applied Sidecar as ns/name; "" for the default scope
	}{
		{
			name: "matching selector beats namespace default",
			sidecars: []*config.Resource{
				sidecarRes("shop", "ns-default", 0, nil),
				sidecarRes("shop", "web", 5, map[string]string{"app": "web"}),
			},
			want: "shop/web",
		},
		{
			name: "oldest matching selector wins",
			sidecars: []*config.Resource{
				sidecarRes("shop", "newer", 9, map[string]string{"app": "web"}),
				sidecarRes("shop", "older", 1, map[string]string{"version": "v1"}),
			},
			want: "shop/older",
		},
		{
			name: "same age: name decides",
			sidecars: []*config.Resource{
				sidecarRes("shop", "b", 1, map[string]string{"app": "web"}),
				sidecarRes("shop", "a", 1, map[string]string{"app": "web"}),
			},
			want: "shop/a",
		},
		{
			name: "non-matching selector falls back to namespace default",
			sidecars: []*config.Resource{
				sidecarRes("shop", "db", 0, map[string]string{"app": "db"}),
				sidecarRes("shop", "ns-default", 3, nil),
			},
			want: "shop/ns-default",
		},
		{
			name: "oldest namespace default",
			sidecars: []*config.Resource{
				sidecarRes("shop", "second", 2, nil),
				sidecarRes("shop", "first", 1, nil),
			},
			want: "shop/first",
		},
		{
			name: "root namespace default when the namespace has none",
			sidecars: []*config.Resource{
				sidecarRes("shop", "db", 0, map[string]string{"app": "db"}),
				sidecarRes("istio-system", "mesh-default", 0, nil),
				sidecarRes("istio-system", "selected", 0, map[string]string{"app": "web"}),
				sidecarRes("other", "elsewhere", 0, nil),
			},
			want: "istio-system/mesh-default",
		},
		{
			name:     "root namespace from mesh config",
			sidecars: []*config.Resource{sidecarRes("istio-system", "ignored", 0, nil), sidecarRes("mesh-root", "root", 0, nil)},
			mesh:     &meshconfig.MeshConfig{RootNamespace: "mesh-root"},
			want:     "mesh-root/root",
		},
		{
			name:     "no Sidecar: default scope",
			sidecars: []*config.Resource{sidecarRes("other", "x", 0, nil)},
			want:     "",
		},
		{
			name: "gateways ignore Sidecars",
			sidecars: []*config.Resource{
				sidecarRes("shop", "web", 0, map[string]string{"app": "web"}),
				sidecarRes("shop", "ns", 0, nil),
				sidecarRes("istio-system", "root", 0, nil),
			},
			proxy: &model.Proxy{Type: model.Router, Namespace: "shop", Labels: app},
			want:  "",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := NewIndex(Input{Resources: c.sidecars, Mesh: c.mesh})
			p := c.proxy
			if p == nil {
				p = sidecarProxy("shop", app)
			}
			sc := ix.For(p)
			got := ""
			if sc.Sidecar != nil {
				got = sc.Sidecar.Meta.Namespace + "/" + sc.Sidecar.Meta.Name
			}
			if got != c.want {
				t.Errorf("applied Sidecar %q, want %q (scope %s)", got, c.want, sc.ID())
			}
			if sc.Namespace != "shop" {
				t.Errorf("scope namespace %q, want the proxy's", sc.Namespace)
			}
		})
	}
}

func TestScopesAreSharedAndComputedOnce(t *testing.T) {
	ix := NewIndex(Input{Resources: []*config.Resource{
		kubeSvc("a", "s1", ""),
		kubeSvc("b", "s2", ""),
		sidecarRes("a", "web", 0, map[string]string{"app": "web"}, "./*"),
		sidecarRes("istio-system", "default", 0, nil, "./*", "istio-system/*"),
	}})
	web1 := ix.For(sidecarProxy("a", map[string]string{"app": "web", "pod": "1"}))
	web2 := ix.For(sidecarProxy("a", map[string]string{"app": "web", "pod": "2"}))
	db := ix.For(sidecarProxy("a", map[string]string{"app": "db"}))
	b := ix.For(sidecarProxy("b", nil))
	c := ix.For(sidecarProxy("c", nil))
	if web1 != web2 || web1.ID() != web2.ID() {
		t.Errorf("proxies under the same Sidecar got %p (%s) and %p (%s)", web1, web1.ID(), web2, web2.ID())
	}
	// The mesh-wide Sidecar gives one scope per namespace: "." differs.
	all := []*SidecarScope{web1, db, b, c}
	for i := range all {
		for j := range all {
			if i != j && (all[i] == all[j] || all[i].ID() == all[j].ID()) {
				t.Errorf("scopes %s and %s should differ", all[i].ID(), all[j].ID())
			}
		}
	}
	if got := hostnames(b.Services()); got != host("s2", "b") {
		t.Errorf("mesh-wide Sidecar in b imports %q, want b's own service", got)
	}
	if got := hostnames(db.Services()); got != host("s1", "a") {
		t.Errorf("mesh-wide Sidecar in a imports %q", got)
	}

	// Concurrent first use still computes one scope per ID.
	ix2 := NewIndex(Input{Resources: []*config.Resource{kubeSvc("a", "s1", "")}})
	var wg sync.WaitGroup
	got := make([]*SidecarScope, 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = ix2.For(sidecarProxy(fmt.Sprint("ns", i%2), map[string]string{"pod": fmt.Sprint(i)}))
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[i%2] {
			t.Fatalf("proxy %d got a different scope %s from proxy %d", i, got[i].ID(), i%2)
		}
	}
	if len(ix2.scopes) != 2 {
		t.Errorf("%d scopes built, want 2", len(ix2.scopes))
	}
}

func TestScopeIDIsStableAcrossSnapshots(t *testing.T) {
	rs := []*config.Resource{kubeSvc("a", "s1", ""), sidecarRes("a", "sc", 0, nil, "./*")}
	p := sidecarProxy("a", nil)
	id1 := NewIndex(Input{Resources: rs}).For(p).ID()
	id2 := NewIndex(Input{Resources: append(rs, kubeSvc("a", "s2", ""))}).For(p).ID()
	if id1 != id2 || id1 == "" {
		t.Errorf("IDs %q and %q", id1, id2)
	}
	if ix := NewIndex(Input{}); ix.For(nil) != nil || ix.RootNamespace() != DefaultRootNamespace {
		t.Errorf("nil proxy or default root namespace")
	}
}

func TestOutboundTrafficPolicy(t *testing.T) {
	registryOnly := &meshconfig.MeshConfig{OutboundTrafficPolicy: &meshconfig.MeshConfig_OutboundTrafficPolicy{
		Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY,
	}}
	withPolicy := func(mode string) *config.Resource {
		r := sidecarRes("a", "sc", 0, nil, "./*")
		m := map[string]int32{"ALLOW_ANY": 1, "REGISTRY_ONLY": 0}[mode]
		r.Spec.(*networking.Sidecar).OutboundTrafficPolicy = &networking.OutboundTrafficPolicy{Mode: networking.OutboundTrafficPolicy_Mode(m)}
		return r
	}
	cases := []struct {
		name string
		rs   []*config.Resource
		mesh *meshconfig.MeshConfig
		want string
	}{
		{"default ALLOW_ANY", nil, nil, "ALLOW_ANY"},
		{"mesh config", nil, registryOnly, "REGISTRY_ONLY"},
		{"Sidecar without policy inherits mesh", []*config.Resource{sidecarRes("a", "sc", 0, nil, "./*")}, registryOnly, "REGISTRY_ONLY"},
		{"Sidecar beats mesh", []*config.Resource{withPolicy("ALLOW_ANY")}, registryOnly, "ALLOW_ANY"},
		{"Sidecar REGISTRY_ONLY", []*config.Resource{withPolicy("REGISTRY_ONLY")}, nil, "REGISTRY_ONLY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := NewIndex(Input{Resources: c.rs, Mesh: c.mesh}).For(sidecarProxy("a", nil))
			if got := sc.OutboundTrafficPolicy.String(); got != c.want {
				t.Errorf("policy %s, want %s", got, c.want)
			}
		})
	}
}
