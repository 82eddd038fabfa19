package scope

import (
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// importFixture: services in a, b, c and ServiceEntries in ext with every
// exportTo form.
func importFixture() []*config.Resource {
	return []*config.Resource{
		kubeSvc("a", "s1", ""),
		kubeSvc("a", "priv", "."),
		kubeSvc("a", "hidden", "~"),
		kubeSvc("a", "tob", "b"),
		kubeSvc("b", "s2", "*"),
		kubeSvc("b", "bpriv", "."),
		kubeSvc("c", "s3", "", 9090),
		serviceEntry("ext", "wild", []string{"*.example.com"}, nil),
		serviceEntry("ext", "api", []string{"api.example.com"}, []string{"*"}),
		serviceEntry("ext", "local", []string{"x.internal"}, []string{"."}),
	}
}

func TestEgressHostImport(t *testing.T) {
	var (
		s1, priv, tob = host("s1", "a"), host("priv", "a"), host("tob", "a")
		s2, s3        = host("s2", "b"), host("s3", "c")
		wild, api     = "*.example.com", "api.example.com"
	)
	join := func(hs ...string) string { return strings.Join(sortedCopy(hs), " ") }
	cases := []struct {
		name   string
		ns     string // the proxy's and the Sidecar's namespace
		egress []string
		port   uint32
		want   string
	}{
		{"./* imports own namespace, not ~ nor exported elsewhere", "a", []string{"./*"}, 0, join(s1, priv)},
		{"*/* imports everything exported here", "a", []string{"*/*"}, 0, join(s1, priv, s2, s3, wild, api)},
		{"~/* imports nothing", "a", []string{"~/*"}, 0, ""},
		{"ns/* skips services private to ns", "a", []string{"b/*"}, 0, s2},
		{"ns/exact host", "a", []string{"b/" + s2}, 0, s2},
		{"ns/exact host of a private service", "a", []string{"b/" + host("bpriv", "b")}, 0, ""},
		{"exact host in the wrong namespace", "a", []string{"c/" + s2}, 0, ""},
		{"*/exact host", "a", []string{"*/" + s3}, 0, s3},
		{"*/*.wildcard imports wildcard and exact hosts", "a", []string{"*/*.example.com"}, 0, join(wild, api)},
		{"wider wildcard imports the wildcard host", "a", []string{"*/*.com"}, 0, join(wild, api)},
		{"exact host does not import a wildcard service host", "a", []string{"*/api.example.com"}, 0, api},
		{"*/*.svc suffix", "a", []string{"*/*.svc.cluster.local"}, 0, join(s1, priv, s2, s3)},
		{"exportTo named namespace", "b", []string{"a/*"}, 0, join(s1, tob)},
		{"exportTo named namespace excludes others", "c", []string{"a/*"}, 0, s1},
		{"exportTo . visible in own namespace", "ext", []string{"./*"}, 0, join(wild, api, "x.internal")},
		{"exportTo . hidden elsewhere", "a", []string{"ext/*"}, 0, join(wild, api)},
		{"listener port filters services", "a", []string{"*/*"}, 9090, s3},
		{"namespace entry and * entry combine", "a", []string{"a/" + s1, "*/" + s2}, 0, join(s1, s2)},
		{"malformed hosts are ignored", "a", []string{"s1", "a/b/c", "/x", "./*"}, 0, join(s1, priv)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := sidecarRes(c.ns, "sc", 0, nil)
			l := &networking.IstioEgressListener{Hosts: c.egress}
			if c.port != 0 {
				l.Port = &networking.SidecarPort{Number: c.port, Protocol: "HTTP", Name: "http"}
			}
			sc.Spec.(*networking.Sidecar).Egress = []*networking.IstioEgressListener{l}
			scope := NewIndex(Input{Resources: append(importFixture(), sc)}).For(sidecarProxy(c.ns, nil))
			if got := hostnames(scope.Services()); got != c.want {
				t.Errorf("imported\n  %q\nwant\n  %q", got, c.want)
			}
			for _, s := range scope.Services() {
				if !scope.DependsOnHost(s.Hostname) || !scope.DependsOn(s.Key) {
					t.Errorf("scope does not depend on imported %s", s.Hostname)
				}
			}
		})
	}
}

func TestDefaultScopeImportsEverythingExported(t *testing.T) {
	sc := NewIndex(Input{Resources: importFixture()}).For(sidecarProxy("b", nil))
	want := strings.Join(sortedCopy([]string{host("s1", "a"), host("tob", "a"), host("s2", "b"), host("bpriv", "b"),
		host("s3", "c"), "*.example.com", "api.example.com"}), " ")
	if got := hostnames(sc.Services()); got != want {
		t.Errorf("default scope imports\n  %q\nwant\n  %q", got, want)
	}
	if sc.Sidecar != nil || len(sc.Egress) != 1 || sc.Egress[0].Port != 0 {
		t.Errorf("default scope should have one catch-all listener: %+v", sc.Egress)
	}
}

func TestOneServicePerHostname(t *testing.T) {
	// The same hostname from a ServiceEntry in two namespaces and a Service.
	h := host("s1", "a")
	rs := []*config.Resource{
		serviceEntry("z", "squat", []string{h}, nil),
		kubeSvc("a", "s1", ""),
		serviceEntry("y", "other", []string{"dup.example.com"}, nil),
		serviceEntry("x", "other", []string{"dup.example.com"}, nil),
	}
	rs[0].Meta.CreationTimestamp.Time = t0.Add(-10 * time.Second) // the squatter is older
	cases := []struct{ ns, host, wantNs string }{
		{"b", h, "a"},                 // Kubernetes Service beats an older ServiceEntry
		{"z", h, "z"},                 // own namespace beats everything
		{"b", "dup.example.com", "x"}, // same age: name, then namespace order
		{"y", "dup.example.com", "y"},
	}
	for _, c := range cases {
		sc := NewIndex(Input{Resources: rs}).For(sidecarProxy(c.ns, nil))
		if s := sc.Service(c.host); s == nil || s.Namespace != c.wantNs {
			t.Errorf("proxy in %s: %s from %+v, want namespace %s", c.ns, c.host, s, c.wantNs)
		}
	}
}

func TestVirtualServiceImport(t *testing.T) {
	rs := []*config.Resource{
		kubeSvc("a", "s1", ""), kubeSvc("b", "s2", ""), kubeSvc("c", "s3", ""),
		virtualService("a", "vs-s1", []string{"s1"}, nil, nil),
		virtualService("a", "vs-gw-only", []string{"s1"}, []string{"ingress"}, nil),
		virtualService("a", "vs-gw-and-mesh", []string{"s1"}, []string{"ingress", "mesh"}, nil),
		virtualService("a", "vs-to-c", []string{"front.example.com"}, nil, nil, host("s3", "c")),
		virtualService("b", "vs-s2", []string{host("s2", "b")}, nil, nil),
		virtualService("b", "vs-private", []string{host("s2", "b")}, nil, []string{"."}),
		virtualService("b", "vs-to-a", []string{host("s2", "b")}, nil, []string{"a"}),
		virtualService("c", "vs-wild", []string{"*.c.svc.cluster.local"}, nil, nil),
	}
	cases := []struct {
		name         string
		egress       []string
		wantVS       string
		wantServices string
	}{
		{"own namespace; a route's destination is imported too", []string{"./*"},
			"a/vs-gw-and-mesh a/vs-s1 a/vs-to-c", host("s1", "a") + " " + host("s3", "c")},
		{"other namespace: exported routes only", []string{"b/*"},
			"b/vs-s2 b/vs-to-a", host("s2", "b")},
		{"wildcard route matches an exact egress host", []string{"c/" + host("s3", "c")},
			"c/vs-wild", host("s3", "c")},
		{"route in a namespace not imported", []string{"c/*"}, "c/vs-wild", host("s3", "c")},
		{"nothing", []string{"~/*"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := NewIndex(Input{Resources: append(rs, sidecarRes("a", "sc", 0, nil, c.egress...))}).For(sidecarProxy("a", nil))
			if got := names(sc.VirtualServices()); got != c.wantVS {
				t.Errorf("VirtualServices %q, want %q", got, c.wantVS)
			}
			if got := hostnames(sc.Services()); got != c.wantServices {
				t.Errorf("services %q, want %q", got, c.wantServices)
			}
			for _, vs := range sc.VirtualServices() {
				if !sc.DependsOn(vs.Key()) {
					t.Errorf("does not depend on imported %s", vs.Key())
				}
			}
		})
	}
}

func TestPerListenerImports(t *testing.T) {
	rs := []*config.Resource{kubeSvc("a", "web", "", 80), kubeSvc("b", "db", "", 5432), kubeSvc("b", "api", "", 80)}
	spec := &networking.Sidecar{Egress: []*networking.IstioEgressListener{
		{Port: &networking.SidecarPort{Number: 5432, Protocol: "TCP", Name: "pg"}, Hosts: []string{"b/*"}},
		{Hosts: []string{"./*"}},
	}}
	sc := NewIndex(Input{Resources: append(rs, res(config.KindSidecar, "a", "sc", 0, spec))}).For(sidecarProxy("a", nil))
	if len(sc.Egress) != 2 || sc.Egress[0].Port != 5432 {
		t.Fatalf("listeners %+v", sc.Egress)
	}
	if got := hostnames(sc.Egress[0].Services); got != host("db", "b") {
		t.Errorf("port 5432 listener imports %q", got)
	}
	if got := hostnames(sc.Services()); got != host("db", "b")+" "+host("web", "a") {
		t.Errorf("union %q", got)
	}
	if sc.DependsOnHost(host("api", "b")) {
		t.Errorf("api has no port 5432 and is not in . : must not be imported")
	}
}

func TestDestinationRuleLookup(t *testing.T) {
	s2 := host("s2", "b")
	base := []*config.Resource{kubeSvc("b", "s2", "")} // the only service, so only its rules are depended on
	cases := []struct {
		name    string
		drs     []*config.Resource
		proxyNs string
		want    string
	}{
		{"proxy namespace first", []*config.Resource{
			destRule("a", "local", s2, "."), destRule("b", "svc-ns", "s2"), destRule("istio-system", "root", "*.cluster.local"),
		}, "a", "a/local"},
		{"service namespace next", []*config.Resource{
			destRule("a", "local", s2, "."), destRule("b", "svc-ns", "s2"), destRule("istio-system", "root", "*.cluster.local"),
		}, "c", "b/svc-ns"},
		{"root namespace last", []*config.Resource{
			destRule("b", "svc-ns", "s2", "."), destRule("istio-system", "root", "*.cluster.local"),
		}, "c", "istio-system/root"},
		{"other namespaces never", []*config.Resource{destRule("d", "stray", s2)}, "c", ""},
		{"not exported to the client", []*config.Resource{destRule("b", "svc-ns", s2, "x")}, "c", ""},
		{"exact beats wildcard, longer wildcard beats shorter", []*config.Resource{
			destRule("b", "wide", "*.svc.cluster.local"), destRule("b", "narrow", "*.b.svc.cluster.local"),
		}, "c", "b/narrow"},
		{"exact host wins", []*config.Resource{
			destRule("b", "narrow", "*.b.svc.cluster.local"), destRule("b", "exact", s2),
		}, "c", "b/exact"},
		{"several rules for one host", []*config.Resource{destRule("b", "one", s2), destRule("b", "two", s2)}, "c", "b/one b/two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := NewIndex(Input{Resources: append(append([]*config.Resource{}, base...), c.drs...)}).For(sidecarProxy(c.proxyNs, nil))
			got := sc.DestinationRules(s2)
			if names(got) != c.want {
				t.Errorf("rules %q, want %q", names(got), c.want)
			}
			for _, dr := range c.drs {
				want := strings.Contains(" "+c.want+" ", " "+dr.Meta.Namespace+"/"+dr.Meta.Name+" ")
				if sc.DependsOn(dr.Key()) != want {
					t.Errorf("DependsOn(%s) = %v, want %v", dr.Key(), !want, want)
				}
			}
		})
	}
}

// TestNamedNamespacesImportInMeshOrder: a listener that names namespaces
// looks only at theirs, and imports them in the mesh's order, as one that
// imports everything would.
func TestNamedNamespacesImportInMeshOrder(t *testing.T) {
	listenerServices := func(egress ...string) []string {
		sc := sidecarRes("a", "sc", 0, nil)
		sc.Spec.(*networking.Sidecar).Egress = []*networking.IstioEgressListener{{Hosts: egress}}
		scope := NewIndex(Input{Resources: append(importFixture(), sc)}).For(sidecarProxy("a", nil))
		var out []string
		for _, s := range scope.Egress[0].Services {
			out = append(out, s.Hostname)
		}
		return out
	}
	var want []string
	for _, h := range listenerServices("*/*") {
		if strings.HasSuffix(h, ".a.svc.cluster.local") || strings.HasSuffix(h, ".b.svc.cluster.local") {
			want = append(want, h)
		}
	}
	if got := listenerServices("b/*", "./*"); strings.Join(got, " ") != strings.Join(want, " ") || len(got) != 3 {
		t.Errorf("b/* and ./* import %q, want %q", got, want)
	}
}
