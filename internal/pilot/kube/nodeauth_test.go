package kube_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/registry"
	"github.com/meshperf/meshperf/internal/testutil"
)

const trustDomain = "cluster.local"

// TestNodeProxyMayImpersonateOnlyPodsOnItsNode: the certificate API, with
// the source's pod informer as its node authorizer, lets the node proxy's
// service account (its token bound to its pod on node-a) ask for the
// identity of a pod on node-a, not of one on node-b alone, and not at all
// with a token bound to no pod.
func TestNodeProxyMayImpersonateOnlyPodsOnItsNode(t *testing.T) {
	s := kubetest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	installCRDs(t, s)
	ns := s.NewNamespace(t, nil)
	for _, node := range []string{"node-a", "node-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + node}}
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	for _, sa := range []string{"node-proxy", "near", "far"} {
		if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	proxyPod := schedule(t, c, ns, "node-proxy-1", "node-proxy", ns+"-node-a")
	schedule(t, c, ns, "near-1", "near", ns+"-node-a")
	schedule(t, c, ns, "far-1", "far", ns+"-node-b")

	src, err := kube.New(ctx, kube.Options{RESTConfig: s.RESTConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	if err := src.Start(ctx, &sliceSink{bySlice: map[string][]registry.SliceEndpoint{}}); err != nil {
		t.Fatal(err)
	}

	authority, err := ca.Open(filepath.Join(t.TempDir(), "ca"), trustDomain)
	if err != nil {
		t.Fatal(err)
	}
	nodeProxy := ca.Identity{Namespace: ns, ServiceAccount: "node-proxy"}
	svc := ca.NewCertificateService(authority, nil, ca.WithAuthenticator(ca.NewTokenReviewAuthenticator(c)),
		ca.WithTrustedNodeAccounts(nodeProxy), ca.WithNodeAuthorizer(src))
	certs := serveCertificates(t, svc)

	bound := token(t, c, ns, "node-proxy", &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: proxyPod.Name, UID: proxyPod.UID})
	unbound := token(t, c, ns, "node-proxy", nil)
	for _, tc := range []struct {
		name, token, want string
		code              codes.Code
	}{
		{"a pod on its node", bound, "near", codes.OK},
		{"a pod on another node", bound, "far", codes.PermissionDenied},
		{"a token bound to no pod", unbound, "near", codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ca.Identity{Namespace: ns, ServiceAccount: tc.want}.SPIFFEID(trustDomain)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token)
			_, err := certs.CreateCertificate(ctx, &pb.IstioCertificateRequest{
				Csr: testutil.SPIFFECSR(t, nodeProxy.SPIFFEID(trustDomain)), ValidityDuration: 3600,
				Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{ca.ImpersonatedIdentityKey: structpb.NewStringValue(want)}},
			})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.code == codes.PermissionDenied && !strings.Contains(err.Error(), "node proxy") {
				t.Errorf("the refusal does not say why: %v", err)
			}
		})
	}
}

// schedule creates a pod of the service account on the node, as the
// scheduler would have placed it.
func schedule(t *testing.T, c kubernetes.Interface, ns, name, sa, node string) *corev1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// token is an istio-ca token of the service account, bound to the object
// when given.
func token(t *testing.T, c kubernetes.Interface, ns, sa string, bound *authnv1.BoundObjectReference) string {
	t.Helper()
	exp := int64(600)
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{ca.TokenAudience}, ExpirationSeconds: &exp, BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

func serveCertificates(t *testing.T, svc *ca.CertificateService) pb.IstioCertificateServiceClient {
	t.Helper()
	return pb.NewIstioCertificateServiceClient(testutil.ServeGRPC(t, svc.Register))
}
