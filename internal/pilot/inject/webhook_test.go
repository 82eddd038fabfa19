package inject

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

var testOptions = Options{ImageRepo: "registry.test", Tag: "v9", PullPolicy: corev1.PullNever}

// injector is the webhook served over TLS on loopback with a certificate
// from a pilot CA, registered with the test API server for the test's
// namespaces only (webhook configurations are cluster-wide, and the tests
// share one API server).
type injector struct {
	client  kubernetes.Interface
	webhook *Webhook
	ca      *ca.CA
	url     string
	base    map[prometheus.Counter]float64 // the metrics when register returned
}

func startInjector(t *testing.T) *injector {
	t.Helper()
	s := kubetest.Start(t)
	authority, err := ca.Open(filepath.Join(t.TempDir(), "ca"), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := authority.IssueServing(PilotNamespace, PilotName, WebhookServiceName, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(serving.CertChainPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := NewWebhook(testOptions, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(WebhookPath, wh)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return &injector{client: s.Client(t), webhook: wh, ca: authority, url: "https://" + ln.Addr().String() + WebhookPath}
}

// register installs the manifest's webhook configuration, pointed at the
// test's handler and limited to namespaces.
func (in *injector) register(t *testing.T, namespaces ...string) {
	t.Helper()
	cfg := WebhookConfiguration(admissionregv1.WebhookClientConfig{URL: &in.url}, in.ca.RootPEM())
	cfg.Name = "t-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	probe := kubetest.Start(t).NewNamespace(t, map[string]string{"istio-injection": "enabled"})
	for i := range cfg.Webhooks {
		sel := cfg.Webhooks[i].NamespaceSelector
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: append(namespaces, probe),
		})
	}
	ctx := context.Background()
	if _, err := in.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, cfg.Name, metav1.DeleteOptions{})
	})
	// The API server picks up a new configuration a moment later, from its
	// own watch: wait until a dry-run pod in the probe namespace is
	// injected, then count the handler's metrics from there.
	testutil.Eventually(t, 30*time.Second, func() error {
		got, err := in.client.CoreV1().Pods(probe).Create(ctx, appPod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if len(got.Spec.Containers) != 2 {
			return errors.New("the webhook configuration is not in effect yet")
		}
		return nil
	})
	in.base = map[prometheus.Counter]float64{}
	for _, c := range []prometheus.Counter{in.webhook.metrics.success, in.webhook.metrics.skip, in.webhook.metrics.failure} {
		in.base[c] = promtest.ToFloat64(c)
	}
}

// count is c's increase since register.
func (in *injector) count(c prometheus.Counter) float64 { return promtest.ToFloat64(c) - in.base[c] }

func appPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "echo", "version": "v1"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "echo",
			Containers:         []corev1.Container{{Name: "app", Image: "registry.test/echo:1"}},
		},
	}
}

func create(t *testing.T, c kubernetes.Interface, ns string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := c.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return got
}

func container(p *corev1.Pod, name string, init bool) *corev1.Container {
	list := p.Spec.Containers
	if init {
		list = p.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func TestWebhookInjectsPodInLabelledNamespace(t *testing.T) {
	in := startInjector(t)
	s := kubetest.Start(t)
	ns := s.NewNamespace(t, map[string]string{"istio-injection": "enabled"})
	in.register(t, ns)

	pod := appPod("echo")
	pod.Annotations = map[string]string{
		"traffic.sidecar.istio.io/excludeOutboundPorts": "5432, 6379",
		"traffic.sidecar.istio.io/excludeInboundPorts":  "9090",
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.test/migrate:1"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	got := create(t, in.client, ns, pod)

	// The capture first among the init containers.
	if names := containerNames(got.Spec.InitContainers); !slices.Equal(names, []string{InitContainerName, "migrate"}) {
		t.Errorf("init containers %v, want istio-init before the pod's own", names)
	}
	initC := container(got, InitContainerName, true)
	if initC == nil {
		t.Fatal("no istio-init")
	}
	wantArgs := []string{"capture", "--proxy-uid", "1337", "--proxy-gid", "1337", "--outbound-port", "15001", "--inbound-port", "15006",
		"--exclude-inbound-ports", "9090", "--exclude-outbound-ports", "5432,6379"}
	if initC.Image != "registry.test/meshperf:v9" || !slices.Equal(initC.Args, wantArgs) || initC.ImagePullPolicy != corev1.PullNever {
		t.Errorf("istio-init: image %s, pull %s, args %q; want registry.test/meshperf:v9, Never, %q", initC.Image, initC.ImagePullPolicy, initC.Args, wantArgs)
	}
	sc := initC.SecurityContext
	if sc == nil || *sc.RunAsUser != 0 || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("istio-init must run as root with NET_ADMIN and NET_RAW: %+v", sc)
	}

	if names := containerNames(got.Spec.Containers); !slices.Equal(names, []string{"app", ProxyContainerName}) {
		t.Errorf("containers %v, want the app then istio-proxy", names)
	}
	proxy := container(got, ProxyContainerName, false)
	if proxy == nil {
		t.Fatal("no istio-proxy")
	}
	if proxy.Image != "registry.test/meshperf-proxy:v9" || *proxy.SecurityContext.RunAsUser != 1337 || !*proxy.SecurityContext.RunAsNonRoot {
		t.Errorf("istio-proxy: image %s, security %+v", proxy.Image, proxy.SecurityContext)
	}
	if !slices.Equal(proxy.Args, []string{"--xds-address", DefaultPilotAddress,
		"--ca-address", "https://meshperf-pilot.meshperf-system.svc:15012", "--ca-root-ca", "/var/run/secrets/istio/root-cert.pem",
		"--auth-token", "/var/run/secrets/tokens/istio-token",
		"--admin-address", "$(INSTANCE_IP):15000", "--capture-mode", "iptables"}) {
		t.Errorf("istio-proxy args %q", proxy.Args)
	}
	env := map[string]string{}
	for _, e := range proxy.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "field:" + e.ValueFrom.FieldRef.FieldPath
		}
		env[e.Name] = v
	}
	for k, want := range map[string]string{
		"POD_NAME": "field:metadata.name", "POD_NAMESPACE": "field:metadata.namespace",
		"INSTANCE_IP": "field:status.podIP", "SERVICE_ACCOUNT": "field:spec.serviceAccountName",
		"LABELS":        "app=echo,security.istio.io/tlsMode=istio,service.istio.io/canonical-name=echo,service.istio.io/canonical-revision=v1,version=v1",
		"WORKLOAD_NAME": "echo",
		"TRUST_DOMAIN":  "cluster.local",
	} {
		if env[k] != want {
			t.Errorf("istio-proxy env %s=%q, want %q", k, env[k], want)
		}
	}
	// The pod carries Istio's injected labels: auto mTLS keys on tlsMode.
	for k, want := range map[string]string{"security.istio.io/tlsMode": "istio", "service.istio.io/canonical-name": "echo",
		"service.istio.io/canonical-revision": "v1", "app": "echo"} {
		if got.Labels[k] != want {
			t.Errorf("pod label %s=%q, want %q (labels %v)", k, got.Labels[k], want, got.Labels)
		}
	}
	if p := proxy.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" || p.HTTPGet.Port.IntValue() != ProxyAdminPort {
		t.Errorf("istio-proxy readiness %+v, want GET /ready on %d", p, ProxyAdminPort)
	}
	mounts := proxy.VolumeMounts
	if len(mounts) != 2 || mounts[0].Name != TokenVolumeName || mounts[0].MountPath+"/istio-token" != TokenPath ||
		mounts[1].Name != "istiod-ca-cert" || mounts[1].MountPath+"/root-cert.pem" != RootCertPath {
		t.Errorf("istio-proxy mounts %+v, want the token at %s and the root at %s", mounts, TokenPath, RootCertPath)
	}

	var token, root *corev1.Volume
	for i := range got.Spec.Volumes {
		switch got.Spec.Volumes[i].Name {
		case TokenVolumeName:
			token = &got.Spec.Volumes[i]
		case "istiod-ca-cert":
			root = &got.Spec.Volumes[i]
		}
	}
	if token == nil || token.Projected == nil || token.Projected.Sources[0].ServiceAccountToken.Audience != "istio-ca" || len(got.Spec.Volumes) != 3 {
		t.Errorf("volumes %+v, want the pod's, a projected token for istio-ca and the root", got.Spec.Volumes)
	}
	if root == nil || root.ConfigMap == nil || root.ConfigMap.Name != "istio-ca-root-cert" {
		t.Errorf("volumes %+v, want istiod-ca-cert from the ConfigMap istio-ca-root-cert", got.Spec.Volumes)
	}

	var st status
	if err := json.Unmarshal([]byte(got.Annotations["sidecar.istio.io/status"]), &st); err != nil {
		t.Fatalf("sidecar.istio.io/status: %v", err)
	}
	if !slices.Equal(st.InitContainers, []string{"istio-init"}) || !slices.Equal(st.Containers, []string{"istio-proxy"}) || !slices.Equal(st.Volumes, []string{"istio-token", "istiod-ca-cert"}) {
		t.Errorf("sidecar.istio.io/status %+v", st)
	}
	if got.Annotations["traffic.sidecar.istio.io/excludeInboundPorts"] != "9090" {
		t.Error("the pod's own annotations were lost")
	}
	if n := in.count(in.webhook.metrics.success); n != 1 {
		t.Errorf("sidecar_injection_success_total %v, want 1", n)
	}
}

func TestWebhookLeavesPodsAlone(t *testing.T) {
	in := startInjector(t)
	s := kubetest.Start(t)
	unlabelled := s.NewNamespace(t, nil)
	labelled := s.NewNamespace(t, map[string]string{"istio-injection": "enabled"})
	in.register(t, unlabelled, labelled)

	byLabel := appPod("by-label")
	byLabel.Labels["sidecar.istio.io/inject"] = "false"
	byAnnotation := appPod("by-annotation")
	byAnnotation.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
	hostNet := appPod("host-network")
	hostNet.Spec.HostNetwork = true
	for _, c := range []struct {
		ns  string
		pod *corev1.Pod
	}{
		{unlabelled, appPod("unlabelled-namespace")},
		{labelled, byLabel},
		{labelled, byAnnotation},
		{labelled, hostNet},
	} {
		got := create(t, in.client, c.ns, c.pod)
		if len(got.Spec.InitContainers) != 0 || len(got.Spec.Containers) != 1 || got.Annotations["sidecar.istio.io/status"] != "" {
			t.Errorf("%s was injected: %v", c.pod.Name, containerNames(got.Spec.Containers))
		}
	}
	// The label is matched by the configuration's objectSelector and the
	// namespace by its namespaceSelector: the API server does not even ask.
	// The annotation and host network are the handler's own policy.
	if n := in.count(in.webhook.metrics.skip); n != 2 {
		t.Errorf("sidecar_injection_skip_total %v, want 2 (the annotation, host network)", n)
	}
}

// A pod labelled sidecar.istio.io/inject=true is injected in a namespace
// without the injection label (Istio's object selector); a namespace that
// turned injection off (istio-injection=disabled) wins over the pod.
func TestWebhookInjectsPodThatOptsIn(t *testing.T) {
	in := startInjector(t)
	s := kubetest.Start(t)
	plain := s.NewNamespace(t, nil)
	disabled := s.NewNamespace(t, map[string]string{"istio-injection": "disabled"})
	in.register(t, plain, disabled)
	for _, c := range []struct {
		ns   string
		want int
	}{{plain, 2}, {disabled, 1}} {
		pod := appPod("opt-in")
		pod.Labels["sidecar.istio.io/inject"] = "true"
		if got := create(t, in.client, c.ns, pod); len(got.Spec.Containers) != c.want {
			t.Errorf("namespace %s: containers %v, want %d", c.ns, containerNames(got.Spec.Containers), c.want)
		}
	}
}

func TestWebhookAdmitsPodItCannotInject(t *testing.T) {
	in := startInjector(t)
	s := kubetest.Start(t)
	ns := s.NewNamespace(t, map[string]string{"istio-injection": "enabled"})
	in.register(t, ns)

	pod := appPod("include-ports")
	// meshperf's capture takes every inbound port: a pod asking for only
	// some would get a sidecar that does not do what it asked.
	pod.Annotations = map[string]string{"traffic.sidecar.istio.io/includeInboundPorts": "8080"}
	got := create(t, in.client, ns, pod)
	if len(got.Spec.InitContainers) != 0 || len(got.Spec.Containers) != 1 {
		t.Errorf("the pod got a sidecar: %v", containerNames(got.Spec.Containers))
	}
	if n := in.count(in.webhook.metrics.failure); n != 1 {
		t.Errorf("sidecar_injection_failure_total %v, want 1", n)
	}
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}
