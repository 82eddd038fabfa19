package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// adminClient is a clientset for the administrator of the cluster in
// stateDir.
func adminClient(stateDir string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", AdminKubeconfig(stateDir))
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * 1e9
	return kubernetes.NewForConfig(cfg)
}

// createDNSObjects gives CoreDNS, a host process, what a CoreDNS pod
// would have: read access to what it serves, and the kube-dns Service at
// DNSServiceIP, whose endpoint is the node IP CoreDNS listens on (no
// selector: nothing else manages the EndpointSlice).
func createDNSObjects(ctx context.Context, c kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces", "endpoints"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: coreDNSUser},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: coreDNSUser}},
	}
	ports := []corev1.ServicePort{
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec:       corev1.ServiceSpec{ClusterIP: DNSServiceIP, Ports: ports},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-node", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "meshperf-cluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{NodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	o := metav1.CreateOptions{}
	for _, create := range []func() error{
		func() error { _, err := c.RbacV1().ClusterRoles().Create(ctx, role, o); return err },
		func() error { _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, o); return err },
		func() error { _, err := c.CoreV1().Services(svc.Namespace).Create(ctx, svc, o); return err },
		func() error {
			_, err := c.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, o)
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// nodeReady is nil once the node reports Ready.
func nodeReady(ctx context.Context, c kubernetes.Interface) error {
	n, err := c.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s not Ready: %s", NodeName, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", NodeName)
}
