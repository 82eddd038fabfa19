package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/pilot/inject/injecttest"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testutil"
)

// meshperf pilot on Kubernetes, with only the RBAC its manifest grants:
// it keeps its root in its namespace's Secret, sets the injector's
// caBundle to that root, publishes it as ConfigMap istio-ca-root-cert,
// and its certificate API gives a pod's token that
// pod's identity and nothing else.
func TestPilotOnKubernetesKeepsItsRootAndAuthenticatesCertificates(t *testing.T) {
	s := kubetest.Start(t)
	admin := s.Client(t)
	ns := s.NewNamespace(t, nil)
	r, root := startPilotOnKubernetes(t, s, ns)
	ctx := context.Background()

	// The root, published to every namespace as istiod publishes it, by
	// the manifest's RBAC.
	testutil.Eventually(t, 30*time.Second, func() error {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, ca.RootConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data[ca.RootConfigMapKey] != string(root) {
			return errors.New(ca.RootConfigMapName + " does not hold the root in the secret")
		}
		return nil
	})

	// The certificate API, as a pod with the projected istio-ca token.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "app", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{ca.TokenAudience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	conn, err := grpc.NewClient(r.Listeners["secureGRPC"], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	certs := pb.NewIstioCertificateServiceClient(conn)
	callCtx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tr.Status.Token)
	own := "spiffe://cluster.local/ns/" + ns + "/sa/app"
	if _, err := certs.CreateCertificate(callCtx, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, own)}); err != nil {
		t.Errorf("own identity: %v", err)
	}
	other := "spiffe://cluster.local/ns/" + ns + "/sa/other"
	if _, err := certs.CreateCertificate(callCtx, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, other)}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("another identity: %v, want PermissionDenied", err)
	}
}

// startPilotOnKubernetes runs meshperf pilot on s as in its pod in ns: the
// manifest applied, its service account's RBAC only, its root kept in a
// Secret and the injector's caBundle set to it. It returns the pilot's
// listeners and its root (PEM); the pilot stops, and must exit cleanly,
// when t ends.
func startPilotOnKubernetes(t *testing.T, s *kubetest.Server, ns string) (proc.Ready, []byte) {
	t.Helper()
	admin := s.Client(t)
	injecttest.ApplyManifest(t, s, ns, inject.Options{Tag: "test"})
	t.Setenv("POD_NAMESPACE", ns)

	dataDir, readyFile := t.TempDir(), filepath.Join(t.TempDir(), "pilot.ready")
	cmd := newCommand("meshperf pilot", "", "")
	f, err := parsePilotArgs(cmd, []string{"--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--secureGRPCAddr", "127.0.0.1:0", "--webhookAddr", "127.0.0.1:0",
		"--ready-file", readyFile, "--log_output_level", "warn"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.listeners.bind(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.listeners.close)
	// As in its pod: the manifest's service account, and the root kept in
	// a Secret.
	f.kube.client, f.kube.inPod = s.ClientAs(t, ns, inject.PilotName), true
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- runBoundPilot(ctx, f, &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d; stderr %q", code, stderr.String())
		}
	})
	r := waitReadyFile(t, readyFile)

	secret, err := admin.CoreV1().Secrets(ns).Get(ctx, ca.KubeRootSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the root's secret: %v", err)
	}
	root := secret.Data["ca-cert.pem"]
	testutil.Eventually(t, 30*time.Second, func() error {
		cfg, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, inject.WebhookConfigName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, root) {
				return errors.New("a caBundle is not the root in the secret")
			}
		}
		return nil
	})

	return r, root
}
