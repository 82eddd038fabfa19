package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// An injected sidecar's certificate, as injection configures it: the real
// meshperf-proxy asks the pilot's certificate API on Kubernetes for its
// own identity with its service-account token, verifying the CA by the
// root in the ConfigMap istio-ca-root-cert. With a token for istio-ca it
// holds a certificate naming its service account that chains to the
// pilot's root; with a token for another audience the CA refuses it, the
// proxy logs the CA's reason and is not ready.
func TestSidecarGetsItsCertificateFromThePilotWithItsToken(t *testing.T) {
	proxyBin := testenv.ProxyBinary(t, filepath.Join("..", ".."))
	s := kubetest.Start(t)
	admin := s.Client(t)
	ns := s.NewNamespace(t, nil)
	r, root := startPilotOnKubernetes(t, s, ns)
	ctx := context.Background()

	// The root as the pod mounts it: the ConfigMap the pilot publishes.
	var cm *corev1.ConfigMap
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		cm, err = admin.CoreV1().ConfigMaps(ns).Get(ctx, inject.RootCertConfigMap, metav1.GetOptions{})
		if err == nil && cm.Data["root-cert.pem"] != string(root) {
			err = errors.New(inject.RootCertConfigMap + " does not hold the pilot's root")
		}
		return err
	})
	dir := t.TempDir()
	rootFile := filepath.Join(dir, "root-cert.pem")
	if err := os.WriteFile(rootFile, []byte(cm.Data["root-cert.pem"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sidecar := func(name, audience string) *sidecarProcess {
		token := filepath.Join(dir, name+"-token")
		if err := os.WriteFile(token, []byte(serviceAccountToken(t, admin, ns, "app", audience)), 0o600); err != nil {
			t.Fatal(err)
		}
		return startSidecar(t, proxyBin, name, []string{
			"--xds-address", r.Listeners["grpc"],
			"--ca-address", "https://" + r.Listeners["secureGRPC"],
			"--ca-root-ca", rootFile,
			"--auth-token", token,
			// The name injected sidecars dial the CA by (here it is
			// reached on loopback): the pilot's Service.
			"--alt-xds-hostname", inject.ServiceHost(ns),
			"--pod-name", name, "--pod-namespace", ns, "--service-account", "app",
			"--instance-ip", "127.0.0.1", "--capture-mode", "none",
		})
	}

	good := sidecar("good", ca.TokenAudience)
	testutil.Eventually(t, 30*time.Second, func() error { return good.ready() })
	dump := good.configDump(t)
	leafPEM, rootsPEM := dump.Secrets["default"].CertificateChain, dump.Secrets["ROOTCA"].TrustedCA
	if len(leafPEM) == 0 || len(rootsPEM) != 1 {
		t.Fatalf("secrets in /config_dump: %+v, want default's chain and ROOTCA's one root", dump.Secrets)
	}
	leaf := parseCertificate(t, leafPEM[0])
	want := "spiffe://cluster.local/ns/" + ns + "/sa/app"
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		t.Errorf("the sidecar's certificate names %v, want %s", leaf.URIs, want)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("the sidecar's certificate does not chain to the pilot's root: %v", err)
	}
	if !parseCertificate(t, rootsPEM[0]).Equal(parseCertificate(t, string(root))) {
		t.Error("ROOTCA is not the pilot's root")
	}

	// A token the CA does not take (another audience): the CA's refusal is
	// logged, retried, and the sidecar stays without a certificate.
	bad := sidecar("bad", "api.example")
	testutil.Eventually(t, 30*time.Second, func() error {
		log := bad.log.String()
		if !strings.Contains(log, "the CA refused the certificate for "+want) || !strings.Contains(log, "unauthenticated") {
			return fmt.Errorf("no refusal with the CA's reason in the log yet:\n%s", log)
		}
		return nil
	})
	if err := bad.ready(); err == nil {
		t.Error("the sidecar refused a certificate says it is ready")
	}
	if d := bad.configDump(t); d.Secrets["default"].CertificateChain != nil {
		t.Errorf("the sidecar refused a certificate has one: %+v", d.Secrets)
	}
}

// serviceAccountToken is a TokenRequest token of ns/sa for audience.
func serviceAccountToken(t *testing.T, client kubernetes.Interface, ns, sa, audience string) string {
	t.Helper()
	exp := int64(600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// sidecarProcess is a running meshperf-proxy and its log.
type sidecarProcess struct {
	admin string
	log   *syncBuffer
}

// startSidecar runs meshperf-proxy with args and an admin port of its
// own, stopped when t ends.
func startSidecar(t *testing.T, bin, name string, args []string) *sidecarProcess {
	t.Helper()
	admin := testutil.ClosedPort(t)
	cmd := exec.Command(bin, append(args, "--admin-address", admin, "--drain-duration", "0")...)
	return &sidecarProcess{admin: admin, log: startLogged(t, name, cmd)}
}

// startLogged starts cmd with its output in the returned buffer; it is
// killed when t ends, and its output logged if t failed.
func startLogged(t *testing.T, name string, cmd *exec.Cmd) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, log.String())
		}
	})
	return log
}

func (p *sidecarProcess) ready() error {
	resp, err := http.Get("http://" + p.admin + "/ready")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/ready: %s %s", resp.Status, body)
	}
	return nil
}

// sidecarDump is the part of /config_dump the test reads: each secret's
// certificates (PEM).
type sidecarDump struct {
	Secrets map[string]struct {
		CertificateChain []string `json:"certificate_chain"`
		TrustedCA        []string `json:"trusted_ca"`
	} `json:"secrets"`
}

func (p *sidecarProcess) configDump(t *testing.T) sidecarDump {
	t.Helper()
	var d sidecarDump
	testutil.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + p.admin + "/config_dump")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(&d)
	})
	return d
}

func parseCertificate(t *testing.T, pemText string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		t.Fatalf("not PEM: %q", pemText)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
