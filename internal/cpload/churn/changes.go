package churn

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

const domain = "svc.cluster.local"

// PerfTest is the book's performance-test.sh: repetition i applies
// shape.ServiceGatewayVS(ns, i), and is delivered when the sidecars that
// import ns have its cluster and the ingress gateways its virtual host (the
// script waits until the gateway routes the new host).
func PerfTest(ns string, reps int, who Audience) []Change {
	sidecars, gateways := who(ns)
	out := make([]Change, 0, reps)
	for i := range reps {
		name := shape.PerfTestName(ns, i)
		out = append(out, Change{
			Label: name,
			Apply: shape.ServiceGatewayVS(ns, i),
			Expect: nonEmpty(
				Expect{Name: "outbound|80||" + name + "." + ns + "." + domain, Proxies: sidecars},
				Expect{Name: name + ".istioinaction.io:80", Proxies: gateways},
			),
		})
	}
	return out
}

// PerfTestCleanup deletes what PerfTest(ns, reps, ...) created.
func PerfTestCleanup(ns string, reps int) []*config.Resource {
	var out []*config.Resource
	for i := range reps {
		out = append(out, shape.ServiceGatewayVS(ns, i)...)
	}
	return out
}

// ConfigChurnName is the ServiceEntry ConfigChurn updates.
const ConfigChurnName = "cpload-churn"

// ConfigChurn updates one ServiceEntry in ns n times, each update giving it a
// new host (churn-I.NS.cpload.example, port 80, one static endpoint): one
// service appears and one disappears per change, and the new host's cluster
// name tells exactly when each update arrived even when pushes merge.
func ConfigChurn(ns string, n int, who Audience) []Change {
	sidecars, _ := who(ns)
	out := make([]Change, 0, n)
	for i := range n {
		host := fmt.Sprintf("churn-%d.%s.cpload.example", i, ns)
		out = append(out, Change{
			Label:  host,
			Apply:  []*config.Resource{ChurnServiceEntry(ns, host)},
			Expect: nonEmpty(Expect{Name: "outbound|80||" + host, Proxies: sidecars}),
		})
	}
	return out
}

// ChurnServiceEntry is ConfigChurn's ServiceEntry with the given host.
func ChurnServiceEntry(ns, host string) *config.Resource {
	return StaticServiceEntry(ns, ConfigChurnName, host)
}

// StaticServiceEntry is ServiceEntry ns/name for host: port 80 (HTTP) and
// one static endpoint, so that it shows in every importing sidecar's
// clusters as outbound|80||host.
func StaticServiceEntry(ns, name, host string) *config.Resource {
	return &config.Resource{Kind: config.KindServiceEntry, APIVersion: "networking.istio.io/v1",
		Meta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: &networking.ServiceEntry{
			Hosts:      []string{host},
			Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
			Location:   networking.ServiceEntry_MESH_INTERNAL,
			Resolution: networking.ServiceEntry_STATIC,
			Endpoints:  []*networking.WorkloadEntry{{Address: "10.255.0.1"}},
		}}
}

// EndpointChurn makes workloads of service (selected by app=service in ns)
// come and go: change 2k adds WorkloadEntry cpload-we-K, change 2k+1
// deletes it. Sidecars importing ns see each as an EDS push (the first
// endpoint response after the change, since the assignment's name does not
// change).
func EndpointChurn(ns, service string, n int, who Audience) []Change {
	sidecars, _ := who(ns)
	out := make([]Change, 0, n)
	for i := range n {
		k := i / 2
		we := &config.Resource{Kind: config.KindWorkloadEntry, APIVersion: "networking.istio.io/v1",
			Meta: metav1.ObjectMeta{Name: fmt.Sprintf("cpload-we-%d", k), Namespace: ns},
			Spec: &networking.WorkloadEntry{
				Address: fmt.Sprintf("10.254.%d.%d", (k/250)%250, k%250+1),
				Labels:  map[string]string{"app": service},
			}}
		c := Change{Expect: nonEmpty(Expect{Type: sim.Endpoint, Proxies: sidecars})}
		if i%2 == 0 {
			c.Label, c.Apply = "add "+we.Meta.Name, []*config.Resource{we}
		} else {
			c.Label, c.Delete = "delete "+we.Meta.Name, []*config.Resource{we}
		}
		out = append(out, c)
	}
	return out
}

func nonEmpty(es ...Expect) []Expect {
	var out []Expect
	for _, e := range es {
		if len(e.Proxies) > 0 {
			out = append(out, e)
		}
	}
	return out
}
