package shape

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// checkMesh asserts what every shape promises: resources that meshperf's own
// decoder accepts from the YAML rendering, unique pod IPs and node ids, and
// DNS-label names.
func checkMesh(t *testing.T, m *Mesh) {
	t.Helper()
	y, err := YAML(m.All())
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := config.Decode("mesh.yaml", y)
	if err != nil {
		t.Fatalf("meshperf refuses the generated YAML: %v", err)
	}
	if len(decoded) != len(m.All()) {
		t.Fatalf("YAML decodes to %d resources, want %d", len(decoded), len(m.All()))
	}
	keys := map[config.Key]bool{}
	for i, r := range m.All() {
		if !config.Equal(r, decoded[i]) {
			t.Errorf("%s does not survive YAML", r.Key())
		}
		if keys[r.Key()] {
			t.Errorf("%s generated twice", r.Key())
		}
		keys[r.Key()] = true
	}
	ips, ids := map[string]bool{}, map[string]bool{}
	for _, p := range m.Proxies {
		if ips[p.IP] {
			t.Errorf("IP %s used twice", p.IP)
		}
		ips[p.IP] = true
		id := p.NodeID("cluster.local")
		if ids[id] {
			t.Errorf("node id %s used twice", id)
		}
		ids[id] = true
		if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
			t.Errorf("pod name %q: %v", p.Name, errs)
		}
		if !keys[config.Key{Kind: config.KindNamespace, Name: p.Namespace}] {
			t.Errorf("pod %s is in namespace %s, which the mesh does not define", p.Name, p.Namespace)
		}
		if b := netip.MustParseAddr(p.IP).As4(); b[3] == 0 || b[3] == 255 {
			t.Errorf("pod IP %s ends in .0 or .255", p.IP)
		}
	}
}

func TestUniform(t *testing.T) {
	m, err := Uniform(UniformOptions{Namespaces: 3, ServicesPerNamespace: 100, Replicas: 2,
		Ports:     []Port{{Name: "http", Number: 80}, {Name: "grpc", Number: 9090}},
		PodLabels: map[string]string{"team": "a"}, NamespaceLabels: map[string]string{"istio-discovery": "enabled"}})
	if err != nil {
		t.Fatal(err)
	}
	checkMesh(t, m)
	if got := m.Count(config.KindNamespace); got != 3 {
		t.Errorf("%d namespaces, want 3", got)
	}
	if got := m.Count(config.KindService); got != 300 {
		t.Errorf("%d services, want 300", got)
	}
	if len(m.Proxies) != 600 {
		t.Errorf("%d pods, want 600", len(m.Proxies))
	}
	p := m.Proxies[599]
	if p.Namespace != "ns-2" || p.Labels["app"] != "svc-99" || p.Labels["team"] != "a" || p.ServiceAccount != "svc-99" {
		t.Errorf("last pod: %+v", p)
	}
	// 600 addresses from 10.0.0.1: 254 in 10.0.0, 254 in 10.0.1 (x.0 and
	// x.255 skipped), 92 in 10.0.2.
	if p.IP != "10.0.2.92" {
		t.Errorf("last pod IP %s, want 10.0.2.92", p.IP)
	}
}

func TestIstioLargeLoadTest(t *testing.T) {
	m, err := IstioLargeLoadTest(LargeLoadTestOptions{Namespaces: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkMesh(t, m)
	if got := m.Count(config.KindService); got != 5*19 {
		t.Errorf("%d services, want 95 (19 per namespace)", got)
	}
	// 20 Deployments per namespace (the root has v1 and v2), 2 replicas each.
	if len(m.Proxies) != 5*20*2 {
		t.Errorf("%d pods, want 200", len(m.Proxies))
	}
	if m.Proxies[0].Namespace != "service-graph00" || m.Proxies[len(m.Proxies)-1].Namespace != "service-graph04" {
		t.Errorf("namespaces %s .. %s", m.Proxies[0].Namespace, m.Proxies[len(m.Proxies)-1].Namespace)
	}
}

func TestBookLab(t *testing.T) {
	m, err := BookLab(BookLabOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkMesh(t, m)
	if len(m.Proxies) != 13 {
		t.Errorf("%d workloads, want 13", len(m.Proxies))
	}
	routers := 0
	for _, p := range m.Proxies {
		if p.Router {
			routers++
		}
	}
	if routers != 2 {
		t.Errorf("%d gateways, want the ingress and egress gateway", routers)
	}
	if len(m.Extra) != 600 {
		t.Errorf("%d extra resources, want 600", len(m.Extra))
	}
	extra := map[config.Kind]int{}
	for _, r := range m.Extra {
		extra[r.Kind]++
	}
	want := map[config.Kind]int{config.KindService: 200, config.KindGateway: 200, config.KindVirtualService: 200}
	if !reflect.DeepEqual(extra, want) {
		t.Errorf("extra resources by kind %v, want %v", extra, want)
	}
	bare, err := BookLab(BookLabOptions{NoExtra: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(bare.Extra) != 0 || len(bare.Resources) != len(m.Resources) {
		t.Errorf("without extras: %d extra, %d resources", len(bare.Extra), len(bare.Resources))
	}
	if err := config.Validate(MeshWideSidecar()); err != nil {
		t.Errorf("mesh-wide Sidecar: %v", err)
	}
}

func TestDeterministic(t *testing.T) {
	render := func(seed uint64) ([]byte, []sim.ProxySpec) {
		m, err := BookLab(BookLabOptions{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		y, err := YAML(m.All())
		if err != nil {
			t.Fatal(err)
		}
		return y, m.Proxies
	}
	y1, p1 := render(7)
	y2, p2 := render(7)
	if !bytes.Equal(y1, y2) || !reflect.DeepEqual(p1, p2) {
		t.Error("the same seed gave different meshes")
	}
	_, p3 := render(8)
	if reflect.DeepEqual(p1, p3) {
		t.Error("a different seed gave the same pod names")
	}
}

func TestServiceGatewayVS(t *testing.T) {
	rs := ServiceGatewayVS("istioinaction", 3)
	if len(rs) != 3 || rs[0].Kind != config.KindGateway || rs[1].Kind != config.KindService || rs[2].Kind != config.KindVirtualService {
		t.Fatalf("got %v, want Gateway, Service, VirtualService", rs)
	}
	name := PerfTestName("istioinaction", 3)
	if !strings.HasPrefix(name, "service-") || !strings.HasSuffix(name, "-3") || len(name) != len("service-abcd-3") {
		t.Errorf("name %q, want service-XXXX-3", name)
	}
	if name != PerfTestName("istioinaction", 3) || name == PerfTestName("istioinaction", 4) {
		t.Error("names must repeat for the same repetition and differ between repetitions")
	}
	for _, r := range rs {
		if r.Meta.Name != name || r.Meta.Namespace != "istioinaction" {
			t.Errorf("%s: want %s in istioinaction", r.Key(), name)
		}
		if err := config.Validate(r); err != nil {
			t.Error(err)
		}
	}
	y, err := YAML(rs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "host: "+name+".istioinaction.svc.cluster.local") ||
		!strings.Contains(string(y), name+".istioinaction.io") {
		t.Errorf("rendered repetition lacks its hosts:\n%s", y)
	}
}

func TestBadOptions(t *testing.T) {
	if _, err := Uniform(UniformOptions{}); err == nil {
		t.Error("Uniform with no namespaces: want an error")
	}
	if _, err := IstioLargeLoadTest(LargeLoadTestOptions{}); err == nil {
		t.Error("large load test with no namespaces: want an error")
	}
	if _, err := Uniform(UniformOptions{Namespaces: 1, ServicesPerNamespace: 1, FirstIP: netip.MustParseAddr("::1")}); err == nil {
		t.Error("IPv6 first IP: want an error")
	}
	// Running out of addresses is an error, not a wrap-around.
	if _, err := Uniform(UniformOptions{Namespaces: 1, ServicesPerNamespace: 1, Replicas: 3,
		FirstIP: netip.MustParseAddr("255.255.255.253")}); err == nil || !strings.Contains(err.Error(), "ran out") {
		t.Errorf("error %v, want one about running out of addresses", err)
	}
	if _, err := Uniform(UniformOptions{Namespaces: 1, ServicesPerNamespace: 1, ServicePrefix: "Bad_"}); err == nil {
		t.Error("invalid service names: want a validation error")
	}
}
