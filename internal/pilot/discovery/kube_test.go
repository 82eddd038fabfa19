package discovery_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/testutil"
)

const discoveryLabel = "meshperf-discovery"

// TestKubernetesClusterDrivesXDS: Services, Pods, EndpointSlices, Nodes and
// Istio objects on a real API server become the pilot's clusters,
// endpoints and routes; an endpoint change is an EDS push; a namespace
// outside discoverySelectors and an invalid VirtualService are ignored.
func TestKubernetesClusterDrivesXDS(t *testing.T) {
	api := kubetest.Start(t)
	ctx := context.Background()
	c := api.Client(t)
	ic, err := istioclient.NewForConfig(api.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer // the informers' goroutines log while the test reads
	src, err := kube.New(ctx, kube.Options{RESTConfig: api.RESTConfig(), InstallCRDs: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	shop := api.NewNamespace(t, map[string]string{discoveryLabel: "on"})
	hidden := api.NewNamespace(t, nil)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: shop + "-node", Labels: map[string]string{
		"topology.kubernetes.io/region": "eu-west", "topology.kubernetes.io/zone": "eu-west-1a"}}}
	create(t, func() error { _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); return err })
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}) })
	for _, ns := range []string{shop, hidden} {
		createService(t, c, ns, "cart")
		createPod(t, c, ns, "cart-1", node.Name)
		createSlice(t, c, ns, "cart", "cart-a", node.Name, map[string]string{"10.1.0.5": "cart-1"})
	}
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: shop}}
	vs.Spec.Hosts = []string{"cart"}
	vs.Spec.Http = append(vs.Spec.Http, routeTo("/checkout-v1", "cart"))
	create(t, func() error {
		_, err := ic.NetworkingV1().VirtualServices(shop).Create(ctx, vs, metav1.CreateOptions{})
		return err
	})
	// The CRD's schema accepts this one; Istio's validation (the pilot's)
	// refuses the regex, which RE2 cannot compile.
	bad := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: shop}}
	bad.Spec.Hosts = []string{"cart"}
	bad.Spec.Http = append(bad.Spec.Http, routeTo("/broken", "cart"))
	bad.Spec.Http[0].Match[0].Uri.MatchType = regexMatch("(")
	create(t, func() error {
		_, err := ic.NetworkingV1().VirtualServices(shop).Create(ctx, bad, metav1.CreateOptions{})
		return err
	})

	mesh, err := config.ParseMeshConfig([]byte("discoverySelectors:\n- matchLabels: {" + discoveryLabel + ": \"on\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, addr := discoverytest.StartKube(t, src, mesh)

	cartHost := "cart." + shop + ".svc.cluster.local"
	cluster := "outbound|80||" + cartHost
	client := dial(t, addr, shop, "client-1", map[string]string{"app": "client"})
	client.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.ClusterType})
	cds := client.recv()
	if !strings.Contains(resourceNames(cds), cluster) {
		t.Fatalf("CDS has no %s", cluster)
	}
	if strings.Contains(resourceNames(cds), "cart."+hidden+".svc") {
		t.Errorf("CDS has the Service of %s, a namespace outside discoverySelectors", hidden)
	}
	client.send(ack(cds))

	client.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.EndpointType, ResourceNames: []string{cluster}})
	eds := client.recv()
	if got := endpointsOf(t, eds); got != "10.1.0.5:8080@eu-west/eu-west-1a" {
		t.Fatalf("EDS of %s = %q, want the slice's address on the node's locality", cluster, got)
	}
	client.send(ackNames(eds, cluster)) // an ACK without names would unsubscribe

	client.send(&discoveryv3.DiscoveryRequest{TypeUrl: snapshot.RouteType, ResourceNames: []string{"80"}})
	rds := client.recv()
	if !strings.Contains(resourceNames(rds), "/checkout-v1") {
		t.Error("RDS for port 80 lacks the VirtualService's route")
	}
	if strings.Contains(resourceNames(rds), "/broken") {
		t.Error("RDS carries the invalid VirtualService's route")
	}
	client.send(ackNames(rds, "80"))
	if _, ok := s.Store().Get(config.Key{Kind: config.KindVirtualService, Namespace: shop, Name: "broken"}); ok {
		t.Error("the invalid VirtualService is in the store")
	}
	if got := counter(t, s, "pilot_k8s_cfg_rejected", "VirtualService"); got != 1 {
		t.Errorf("pilot_k8s_cfg_rejected{type=VirtualService} = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "VirtualService/"+shop+"/broken") {
		t.Errorf("no warning names the invalid VirtualService; logs:\n%s", logs.String())
	}

	// A second pod joins the slice: an endpoint (EDS) push, not a full one.
	createPod(t, c, shop, "cart-2", node.Name)
	slice, err := c.DiscoveryV1().EndpointSlices(shop).Get(ctx, "cart-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = append(slice.Endpoints, sliceEndpoint("10.1.0.6", "cart-2", shop, node.Name))
	if slice, err = c.DiscoveryV1().EndpointSlices(shop).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pushed := client.recv()
	if pushed.TypeUrl != snapshot.EndpointType {
		t.Fatalf("the endpoint change pushed %s first, want EDS", pushed.TypeUrl)
	}
	if got := endpointsOf(t, pushed); got != "10.1.0.5:8080@eu-west/eu-west-1a 10.1.0.6:8080@eu-west/eu-west-1a" {
		t.Errorf("EDS after the change = %q", got)
	}
	if got := counter(t, s, "pilot_inbound_updates", "eds"); got < 1 {
		t.Errorf("pilot_inbound_updates{type=eds} = %v, want the change counted as an endpoint update", got)
	}
	client.send(ackNames(pushed, cluster))

	// A change in the namespace outside discoverySelectors is no inbound
	// update. One informer delivers every slice's events in order, so once
	// the change made after it (cart-2 leaves) has been pushed, it has been
	// handled too.
	edsBefore := counter(t, s, "pilot_inbound_updates", "eds")
	hslice, err := c.DiscoveryV1().EndpointSlices(hidden).Get(ctx, "cart-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hslice.Endpoints = append(hslice.Endpoints, sliceEndpoint("10.1.0.7", "cart-1", hidden, node.Name))
	if _, err := c.DiscoveryV1().EndpointSlices(hidden).Update(ctx, hslice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = slice.Endpoints[:1]
	if _, err := c.DiscoveryV1().EndpointSlices(shop).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := endpointsOf(t, client.recv()); got != "10.1.0.5:8080@eu-west/eu-west-1a" {
		t.Errorf("EDS after cart-2 left = %q", got)
	}
	if got := counter(t, s, "pilot_inbound_updates", "eds"); got != edsBefore+1 {
		t.Errorf("pilot_inbound_updates{type=eds} went from %v to %v: the change in %s was counted", edsBefore, got, hidden)
	}
}

func create(t *testing.T, fn func() error) {
	t.Helper()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
}

func createService(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": name},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	create(t, func() error {
		_, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
		return err
	})
}

func createPod(t *testing.T, c kubernetes.Interface, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "cart"}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "cart",
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:test"}}},
	}
	create(t, func() error {
		_, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		return err
	})
}

// createSlice writes what the EndpointSlice controller would for a
// Service whose pods are at the addresses (address -> pod name).
func createSlice(t *testing.T, c kubernetes.Interface, ns, service, name, node string, pods map[string]string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
	}
	for addr, pod := range pods {
		slice.Endpoints = append(slice.Endpoints, sliceEndpoint(addr, pod, ns, node))
	}
	create(t, func() error {
		_, err := c.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), slice, metav1.CreateOptions{})
		return err
	})
}

func sliceEndpoint(addr, pod, ns, node string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
		NodeName:   ptr.To(node),
	}
}

// ackNames acknowledges a response to a request that named its resources
// (EDS, RDS), naming them again as SotW requires.
func ackNames(r *discoveryv3.DiscoveryResponse, names ...string) *discoveryv3.DiscoveryRequest {
	req := ack(r)
	req.ResourceNames = names
	return req
}

// endpointsOf lists an EDS response's endpoints as "address:port@region/zone",
// in order.
func endpointsOf(t *testing.T, r *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		var cla endpointv3.ClusterLoadAssignment
		if err := proto.Unmarshal(a.Value, &cla); err != nil {
			t.Fatal(err)
		}
		for _, group := range cla.Endpoints {
			loc := group.GetLocality().GetRegion() + "/" + group.GetLocality().GetZone()
			for _, lb := range group.LbEndpoints {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				out = append(out, sa.GetAddress()+":"+itoa(sa.GetPortValue())+"@"+loc)
			}
		}
	}
	return strings.Join(out, " ")
}

func routeTo(prefix, host string) *networking.HTTPRoute {
	return &networking.HTTPRoute{
		Match: []*networking.HTTPMatchRequest{{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: prefix}}}},
		Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: host}}},
	}
}

func regexMatch(re string) *networking.StringMatch_Regex {
	return &networking.StringMatch_Regex{Regex: re}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
