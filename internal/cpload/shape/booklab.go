package shape

import (
	"fmt"
	"hash/fnv"
	"net/netip"

	networking "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// The book lab's namespaces (Istio in Action, chapter 11).
const (
	BookNamespace       = "istioinaction"
	BookRootNamespace   = "istio-system"
	BookPromNamespace   = "prometheus"
	bookExtraSets       = 200 // 200 each of Service, Gateway, VirtualService
	perfTestAPI         = "networking.istio.io/v1alpha3"
	bookGatewayHostBase = ".istioinaction.io"
)

// BookLabOptions tune the book lab.
type BookLabOptions struct {
	// NoExtra leaves out the 600 extra resources (the state before the
	// chapter applies resources-600.yaml).
	NoExtra bool
	Seed    uint64
	FirstIP netip.Addr
}

// BookLab generates the control-plane tuning lab of Istio in Action chapter
// 11: 13 workloads (catalog, ten sleep replicas, the ingress and egress
// gateways) in istioinaction and istio-system, the catalog's Gateway and
// VirtualService for catalog.istioinaction.io:80, the control plane's and
// Prometheus' Services (the mesh-wide Sidecar imports istio-system/* and
// prometheus/*), and, in Extra, 600 resources: 200 each of Service, Gateway
// and VirtualService. The book's resources-600.yaml is not published with
// its text, so the extras are assumed to have the shape its
// performance-test.sh creates (see ServiceGatewayVS), named extra-NNN.
func BookLab(o BookLabOptions) (*Mesh, error) {
	g, err := newGenerator(o.Seed, o.FirstIP)
	if err != nil {
		return nil, fmt.Errorf("book lab mesh: %w", err)
	}
	g.add(
		namespace(BookNamespace, map[string]string{"istio-injection": "enabled"}),
		namespace(BookRootNamespace, nil),
		namespace(BookPromNamespace, nil),
		// The control plane and gateways, as the demo profile installs them.
		service(BookRootNamespace, "istiod", map[string]string{"app": "istiod"}, map[string]string{"app": "istiod"}, []Port{
			{Name: "grpc-xds", Number: 15010}, {Name: "https-dns", Number: 15012},
			{Name: "https-webhook", Number: 443, TargetPort: 15017}, {Name: "http-monitoring", Number: 15014}}),
		gatewayService("istio-ingressgateway", "ingressgateway"),
		gatewayService("istio-egressgateway", "egressgateway"),
		service(BookPromNamespace, "prom-kube-prometheus-stack-prometheus", nil,
			map[string]string{"app.kubernetes.io/name": "prometheus"}, []Port{{Name: "http-web", Number: 9090}}),
		// The chapter's applications.
		service(BookNamespace, "catalog", map[string]string{"app": "catalog"}, map[string]string{"app": "catalog"},
			[]Port{{Name: "http", Number: 80, TargetPort: 3000}}),
		service(BookNamespace, "sleep", map[string]string{"app": "sleep"}, map[string]string{"app": "sleep"},
			[]Port{{Name: "http", Number: 80}}),
		httpGateway(BookNamespace, "catalog-gateway", "catalog"+bookGatewayHostBase, map[string]string{"istio": "ingressgateway"}),
		gatewayRoute(BookNamespace, "catalog", "catalog"+bookGatewayHostBase, "catalog-gateway",
			"catalog."+BookNamespace+".svc.cluster.local", 80),
	)
	steps := []struct {
		ns, deployment string
		replicas       int
		labels         map[string]string
		sa             string
		router         bool
	}{
		{BookNamespace, "catalog", 1, map[string]string{"app": "catalog", "version": "v1"}, "default", false},
		{BookNamespace, "sleep", 10, map[string]string{"app": "sleep"}, "sleep", false},
		{BookRootNamespace, "istio-ingressgateway", 1, map[string]string{"app": "istio-ingressgateway", "istio": "ingressgateway"},
			"istio-ingressgateway-service-account", true},
		{BookRootNamespace, "istio-egressgateway", 1, map[string]string{"app": "istio-egressgateway", "istio": "egressgateway"},
			"istio-egressgateway-service-account", true},
	}
	for _, s := range steps {
		if err := g.pods(s.ns, s.deployment, s.replicas, s.labels, s.sa, s.router); err != nil {
			return nil, fmt.Errorf("book lab mesh: %w", err)
		}
	}
	if !o.NoExtra {
		for i := range bookExtraSets {
			g.mesh.Extra = append(g.mesh.Extra, perfTestResources(BookNamespace, fmt.Sprintf("extra-%03d", i))...)
		}
	}
	m, err := g.check()
	if err != nil {
		return nil, fmt.Errorf("book lab mesh: %w", err)
	}
	return m, nil
}

func gatewayService(name, istioLabel string) *config.Resource {
	labels := map[string]string{"app": name, "istio": istioLabel}
	return service(BookRootNamespace, name, labels, map[string]string{"istio": istioLabel}, []Port{
		{Name: "http2", Number: 80, TargetPort: 8080}, {Name: "https", Number: 443, TargetPort: 8443}})
}

// MeshWideSidecar is the chapter's ch11/sidecar-mesh-wide.yaml: a Sidecar in
// the root namespace that lets every proxy reach only istio-system and
// prometheus, and nothing outside the registry.
func MeshWideSidecar() *config.Resource {
	return &config.Resource{Kind: config.KindSidecar, APIVersion: networkingAPI,
		Meta: metav1.ObjectMeta{Name: "default", Namespace: BookRootNamespace},
		Spec: &networking.Sidecar{
			Egress:                []*networking.IstioEgressListener{{Hosts: []string{"istio-system/*", "prometheus/*"}}},
			OutboundTrafficPolicy: &networking.OutboundTrafficPolicy{Mode: networking.OutboundTrafficPolicy_REGISTRY_ONLY},
		}}
}

// PerfTestName is the name ServiceGatewayVS gives repetition i in namespace
// ns: service-XXXX-i as performance-test.sh, whose four random hex digits are
// here derived from ns and i so that runs repeat.
func PerfTestName(ns string, i int) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", ns, i)
	return fmt.Sprintf("service-%04x-%d", h.Sum32()&0xffff, i)
}

// ServiceGatewayVS returns what one repetition of the book's
// performance-test.sh applies, in its order: a Gateway for
// NAME.istioinaction.io:80 on the ingress gateway, a Service NAME labelled and
// selecting app=catalog (http 80 -> 3000), and a VirtualService routing that
// host through that Gateway to NAME.NS.svc.cluster.local:80 (the script writes
// the istioinaction namespace there, which is its default). NAME is
// PerfTestName(ns, i); a sidecar sees the change as the new cluster
// outbound|80||NAME.NS.svc.cluster.local, the ingress gateway as the virtual
// host for NAME.istioinaction.io.
func ServiceGatewayVS(ns string, i int) []*config.Resource {
	return perfTestResources(ns, PerfTestName(ns, i))
}

func perfTestResources(ns, name string) []*config.Resource {
	host := name + bookGatewayHostBase
	gw := httpGateway(ns, name, host, map[string]string{"istio": "ingressgateway"})
	vs := gatewayRoute(ns, name, host, name, name+"."+ns+".svc.cluster.local", 80)
	gw.APIVersion, vs.APIVersion = perfTestAPI, perfTestAPI
	svc := service(ns, name, map[string]string{"app": "catalog"}, map[string]string{"app": "catalog"},
		[]Port{{Name: "http", Number: 80, TargetPort: 3000}})
	return []*config.Resource{gw, svc, vs}
}
