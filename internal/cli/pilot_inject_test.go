package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// meshperf pilot --webhookAddr answers an AdmissionReview over TLS with a
// certificate for its Service's name from its own CA, with the images its
// flags name, and counts it in istiod's metric.
func TestPilotServesInjectionWebhook(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // off Kubernetes: no caBundle patcher
	dataDir := t.TempDir()
	r, stop := startPilot(t, "--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--webhookAddr", "127.0.0.1:0", "--ready-file", filepath.Join(t.TempDir(), "pilot.ready"),
		"--image-repo", "registry.test/mesh", "--tag", "v7", "--pull-policy", "Never", "--log_output_level", "warn")
	root, err := os.ReadFile(filepath.Join(dataDir, "ca", "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "meshperf-pilot.meshperf-system.svc"},
	}}

	pod, _ := json.Marshal(corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}})
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "7", Namespace: "shop", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: pod}},
	})
	resp, err := client.Post("https://"+r.Listeners["webhook"]+"/inject", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil || out.Response == nil {
		t.Fatalf("%s: %v: %s", resp.Status, err, body)
	}
	if !out.Response.Allowed || out.Response.UID != "7" || !strings.Contains(string(out.Response.Patch), `"image":"registry.test/mesh/meshperf-proxy:v7"`) {
		t.Errorf("response %+v, patch %s", out.Response, out.Response.Patch)
	}

	metrics, err := http.Get("http://" + r.Listeners["monitoring"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(m), "sidecar_injection_success_total 1") {
		t.Error("sidecar_injection_success_total is not 1 on /metrics")
	}
	stop()
}
