package discovery_test

import (
	"bytes"
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"istio.io/istio/pkg/workloadapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/discovery/discoverytest"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
)

// TestNodeProxyGetsKubernetesPodsAsWorkloads: on a cluster, every pod with
// an address is a workload the node proxies are sent under the uid they
// match captured pods by, enrolled by its namespace's label unless it opts
// out or runs a sidecar, with the services that select it; a pod on the
// host's network is none, and a deleted pod is withdrawn.
func TestNodeProxyGetsKubernetesPodsAsWorkloads(t *testing.T) {
	api := kubetest.Start(t)
	ctx := context.Background()
	c := api.Client(t)
	src, err := kube.New(ctx, kube.Options{RESTConfig: api.RESTConfig(), InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := api.NewNamespace(t, map[string]string{"istio.io/dataplane-mode": "ambient"})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "cart"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}},
	}}
	create(t, func() error { _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); return err })
	runPod(t, c, ns, "cart-1", "10.1.0.5", nil, false)
	runPod(t, c, ns, "cart-2", "10.1.0.6", map[string]string{"istio.io/dataplane-mode": "none"}, false)
	runPod(t, c, ns, "cart-3", "10.1.0.7", nil, true)
	host := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-host", Namespace: ns, Labels: map[string]string{"app": "cart"}},
		Spec: corev1.PodSpec{NodeName: "node-a", HostNetwork: true,
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:test"}}},
	}
	create(t, func() error { _, err := c.CoreV1().Pods(ns).Create(ctx, host, metav1.CreateOptions{}); return err })
	setPodStatus(t, c, ns, "on-host", "198.18.0.1")

	s, _ := discoverytest.StartKube(t, src, nil)
	_, cc := serveTLS(t, s)
	n := openNodeProxyStream(t, cc)
	node := &corev3.Node{Id: ztunnelID}
	n.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: snapshot.AddressType})
	n.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: snapshot.AuthorizationType, ResourceNamesSubscribe: []string{"*"}})

	uid := func(name string) string { return "Kubernetes//Pod/" + ns + "/" + name }
	workloads := map[string]*workloadapi.Workload{}
	for workloads[uid("cart-1")] == nil || workloads[uid("cart-2")] == nil || workloads[uid("cart-3")] == nil {
		applyAddresses(t, n.next(), workloads)
	}
	cart1 := workloads[uid("cart-1")]
	serviceName := ns + "/cart." + ns + ".svc.cluster.local"
	ports := cart1.GetServices()[serviceName].GetPorts()
	if cart1.GetTunnelProtocol() != workloadapi.TunnelProtocol_HBONE || cart1.GetServiceAccount() != "cart" ||
		cart1.GetNode() != "node-a" || !bytes.Equal(cart1.GetAddresses()[0], []byte{10, 1, 0, 5}) ||
		cart1.GetStatus() != workloadapi.WorkloadStatus_HEALTHY || cart1.GetWorkloadName() != "cart" {
		t.Errorf("cart-1 = %v, want enrolled (HBONE), service account cart, on node-a at 10.1.0.5, healthy, of workload cart (its Deployment)", cart1)
	}
	if len(ports) != 1 || ports[0].GetServicePort() != 80 || ports[0].GetTargetPort() != 8080 {
		t.Errorf("cart-1's services = %v, want %s with 80 -> 8080 (targetPort named web)", cart1.GetServices(), serviceName)
	}
	if p := workloads[uid("cart-2")].GetTunnelProtocol(); p != workloadapi.TunnelProtocol_NONE {
		t.Errorf("cart-2 (istio.io/dataplane-mode=none) has tunnel protocol %v, want NONE", p)
	}
	if p := workloads[uid("cart-3")].GetTunnelProtocol(); p != workloadapi.TunnelProtocol_NONE {
		t.Errorf("cart-3 (with a sidecar) has tunnel protocol %v, want NONE", p)
	}
	if _, ok := workloads[uid("on-host")]; ok {
		t.Error("a pod on the host's network is a workload")
	}

	// Without a kubelet to finish a graceful deletion, only an immediate one
	// removes the pod.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "cart-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	for workloads[uid("cart-1")] != nil {
		applyAddresses(t, n.next(), workloads)
	}
	if workloads[uid("cart-2")] == nil {
		t.Error("deleting cart-1 withdrew cart-2 too")
	}
}

// applyAddresses applies a delta WDS response to the workloads by uid.
func applyAddresses(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse, workloads map[string]*workloadapi.Workload) {
	t.Helper()
	if r.TypeUrl != snapshot.AddressType {
		return
	}
	for _, res := range r.Resources {
		addr := &workloadapi.Address{}
		if err := res.Resource.UnmarshalTo(addr); err != nil {
			t.Fatal(err)
		}
		if w := addr.GetWorkload(); w != nil {
			workloads[res.Name] = w
		}
	}
	for _, name := range r.RemovedResources {
		delete(workloads, name)
	}
}

// runPod creates a pod of Deployment cart (through its ReplicaSet), of
// service account cart on node-a, with a container port named web (8080)
// and, if sidecar, an istio-proxy container, then gives it the status the
// kubelet would: running, ready, at ip.
func runPod(t *testing.T, c kubernetes.Interface, ns, name, ip string, labels map[string]string, sidecar bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "cart", "pod-template-hash": "7d9f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cart-7d9f", UID: "cart-7d9f", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "cart", Containers: []corev1.Container{{
			Name: "app", Image: "meshperf.local/meshperf:test",
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}},
		}}},
	}
	for k, v := range labels {
		pod.Labels[k] = v
	}
	if sidecar {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "meshperf.local/meshperf-proxy:test"})
	}
	create(t, func() error {
		_, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		return err
	})
	setPodStatus(t, c, ns, name, ip)
}

func setPodStatus(t *testing.T, c kubernetes.Interface, ns, name, ip string) {
	t.Helper()
	ctx := context.Background()
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
