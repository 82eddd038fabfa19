package ca

import (
	"context"
	"os"
	"path/filepath"
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
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// tokenFor is a TokenRequest token of namespace/sa for audience.
func tokenFor(t *testing.T, c kubernetes.Interface, namespace, sa, audience string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CoreV1().ServiceAccounts(namespace).Get(ctx, sa, metav1.GetOptions{}); err != nil {
		if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request for %s/%s: %v", namespace, sa, err)
	}
	return tr.Status.Token
}

// serveCertificates serves the service over gRPC on loopback and returns a client.
func serveCertificates(t *testing.T, svc *CertificateService) pb.IstioCertificateServiceClient {
	t.Helper()
	return pb.NewIstioCertificateServiceClient(testutil.ServeGRPC(t, svc.Register))
}

func TestCertificateServiceTokenAuthentication(t *testing.T) {
	s := kubetest.Start(t)
	client := s.Client(t)
	ns := s.NewNamespace(t, nil)
	authority, err := Open(filepath.Join(t.TempDir(), "ca"), testTD)
	if err != nil {
		t.Fatal(err)
	}
	nodeProxy := Identity{ns, "node-proxy"}
	svc := NewCertificateService(authority, nil, WithAuthenticator(NewTokenReviewAuthenticator(client)), WithTrustedNodeAccounts(nodeProxy))
	certs := serveCertificates(t, svc)

	appToken := tokenFor(t, client, ns, "app", TokenAudience)
	nodeToken := tokenFor(t, client, ns, "node-proxy", TokenAudience)
	otherAudience := tokenFor(t, client, ns, "app", "https://kubernetes.default.svc.cluster.local")
	app := Identity{ns, "app"}.SPIFFEID(testTD)
	other := Identity{ns, "other"}.SPIFFEID(testTD)
	impersonate := func(id string) *structpb.Struct {
		return &structpb.Struct{Fields: map[string]*structpb.Value{ImpersonatedIdentityKey: structpb.NewStringValue(id)}}
	}

	cases := []struct {
		name     string
		token    string // "" sends no authorization header
		csrID    string
		meta     *structpb.Struct
		want     codes.Code
		wantLeaf string
	}{
		{name: "own identity", token: appToken, csrID: app, want: codes.OK, wantLeaf: app},
		{name: "another identity", token: appToken, csrID: other, want: codes.PermissionDenied},
		{name: "no token", csrID: app, want: codes.Unauthenticated},
		{name: "bad token", token: "not-a-token", csrID: app, want: codes.Unauthenticated},
		{name: "token for another audience", token: otherAudience, csrID: app, want: codes.Unauthenticated},
		{name: "impersonation by a workload", token: appToken, csrID: app, meta: impersonate(other), want: codes.PermissionDenied},
		{name: "impersonation by the node proxy", token: nodeToken, csrID: Identity{ns, "node-proxy"}.SPIFFEID(testTD), meta: impersonate(other), want: codes.OK, wantLeaf: other},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if c.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
			}
			resp, err := certs.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, c.csrID), ValidityDuration: 3600, Metadata: c.meta})
			if got := status.Code(err); got != c.want {
				t.Fatalf("code %v (%v), want %v", got, err, c.want)
			}
			if c.want != codes.OK {
				return
			}
			if err := VerifyWorkload(authority.RootPEM(), []byte(resp.CertChain[0]), c.wantLeaf, time.Now()); err != nil {
				t.Errorf("the certificate is not for %s: %v", c.wantLeaf, err)
			}
		})
	}
}

func TestCertificateServiceWithoutAuthenticatorSignsAnyIdentity(t *testing.T) {
	authority, err := Open(filepath.Join(t.TempDir(), "ca"), testTD)
	if err != nil {
		t.Fatal(err)
	}
	certs := serveCertificates(t, NewCertificateService(authority, nil))
	id := Identity{"anywhere", "anyone"}.SPIFFEID(testTD)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := certs.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, id)}); err != nil {
		t.Fatalf("off Kubernetes the service authenticates no one, as before: %v", err)
	}
}

func TestRootSurvivesInSecret(t *testing.T) {
	s := kubetest.Start(t)
	client := s.Client(t)
	ns := s.NewNamespace(t, nil)
	ctx := context.Background()

	first := filepath.Join(t.TempDir(), "ca")
	if found, err := RestoreRoot(ctx, client, ns, KubeRootSecretName, first); err != nil || found {
		t.Fatalf("RestoreRoot without a secret: found %v, %v", found, err)
	}
	a, err := Open(first, testTD)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveRoot(ctx, client, ns, KubeRootSecretName, first); err != nil {
		t.Fatal(err)
	}

	// A restart on another node: an empty directory.
	second := filepath.Join(t.TempDir(), "ca")
	if found, err := RestoreRoot(ctx, client, ns, KubeRootSecretName, second); err != nil || !found {
		t.Fatalf("RestoreRoot: found %v, %v", found, err)
	}
	b, err := Open(second, testTD)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.RootPEM()) != string(b.RootPEM()) {
		t.Fatal("the restarted CA has a new root")
	}
	if err := SaveRoot(ctx, client, ns, KubeRootSecretName, second); err != nil {
		t.Fatalf("saving the same root again: %v", err)
	}

	// A pilot that lost the race with another root is told to restart.
	third := filepath.Join(t.TempDir(), "ca")
	if _, err := Open(third, testTD); err != nil {
		t.Fatal(err)
	}
	if err := SaveRoot(ctx, client, ns, KubeRootSecretName, third); err == nil {
		t.Fatal("SaveRoot accepted a root different from the secret's")
	}
}
