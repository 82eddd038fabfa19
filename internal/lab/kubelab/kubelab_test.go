package kubelab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	pilotkube "github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/testenv"
)

// The cluster tests share one real API server (no kubelet, scheduler or
// controller manager), which kubetest.Main stops.
func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

func quick(t *testing.T, modes ...scenario.Mode) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Load("quick")
	if err != nil {
		t.Fatal(err)
	}
	if len(modes) > 0 {
		if s, err = s.Apply(scenario.Overrides{Modes: modes}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func specOf(t *testing.T, s *scenario.Scenario, m scenario.Mode) scenario.RunSpec {
	t.Helper()
	for _, spec := range s.Expand() {
		if spec.Mode == m {
			return spec
		}
	}
	t.Fatalf("no run of mode %s", m)
	return scenario.RunSpec{}
}

// TestRenderModes pins each mode's labels and annotations to Istio's
// benchmark's: injection by namespace label and per-Deployment annotation,
// STRICT mTLS with both sidecars, ambient by namespace label, the waypoint
// as a Gateway the Service names.
func TestRenderModes(t *testing.T) {
	s := quick(t, scenario.NoMesh, scenario.ServerSidecar, scenario.ClientSidecar, scenario.BothSidecars,
		scenario.Ambient, scenario.AmbientWaypoint)
	r := Config{RunID: "abc123", Mesh: MeshIstio}.render()
	for _, tc := range []struct {
		mode                       scenario.Mode
		nsInjection, nsAmbient     string
		clientInject, serverInject string
		peerAuth                   string
		waypoint                   bool
	}{
		{scenario.NoMesh, "", "", "false", "false", "", false},
		{scenario.ServerSidecar, "enabled", "", "false", "true", "PERMISSIVE", false},
		{scenario.ClientSidecar, "enabled", "", "true", "false", "PERMISSIVE", false},
		{scenario.BothSidecars, "enabled", "", "true", "true", "STRICT", false},
		{scenario.Ambient, "", "ambient", "false", "false", "STRICT", false},
		{scenario.AmbientWaypoint, "", "ambient", "false", "false", "STRICT", true},
	} {
		o := r.Objects(specOf(t, s, tc.mode))
		if o.Namespace.Name != "meshperf-lab-abc123" || o.Namespace.Labels[RunLabel] != "abc123" {
			t.Errorf("%s: namespace %s labels %v", tc.mode, o.Namespace.Name, o.Namespace.Labels)
		}
		if got := o.Namespace.Labels[injectionLabel]; got != tc.nsInjection {
			t.Errorf("%s: namespace istio-injection=%q, want %q", tc.mode, got, tc.nsInjection)
		}
		if got := o.Namespace.Labels[dataplaneModeLabel]; got != tc.nsAmbient {
			t.Errorf("%s: namespace istio.io/dataplane-mode=%q, want %q", tc.mode, got, tc.nsAmbient)
		}
		for _, d := range []struct{ got, want, name string }{
			{o.Client.Spec.Template.Annotations[injectAnnotation], tc.clientInject, "client"},
			{o.Server.Spec.Template.Annotations[injectAnnotation], tc.serverInject, "server"},
		} {
			if d.got != d.want {
				t.Errorf("%s: %s sidecar.istio.io/inject=%q, want %q", tc.mode, d.name, d.got, d.want)
			}
		}
		if got := o.Server.Spec.Template.Annotations[ModeAnnotation]; got != string(tc.mode) {
			t.Errorf("%s: pod template mode %q", tc.mode, got)
		}
		if tc.peerAuth == "" {
			if o.PeerAuth != nil {
				t.Errorf("%s: a PeerAuthentication", tc.mode)
			}
		} else if got := o.PeerAuth.Spec.GetMtls().GetMode().String(); got != tc.peerAuth {
			t.Errorf("%s: PeerAuthentication %s, want %s", tc.mode, got, tc.peerAuth)
		}
		if (o.Waypoint != nil) != tc.waypoint || (o.Service.Labels[useWaypointLabel] != "") != tc.waypoint {
			t.Errorf("%s: waypoint %v, Service labels %v, want waypoint %v", tc.mode, o.Waypoint != nil, o.Service.Labels, tc.waypoint)
		}
		if tc.waypoint && (o.Waypoint.Spec.GatewayClassName != waypointClass || o.Waypoint.Labels[waypointForLabel] != "service") {
			t.Errorf("%s: waypoint %+v", tc.mode, o.Waypoint)
		}
		if o.DestinationRule != nil {
			t.Errorf("%s: a DestinationRule with mTLS on", tc.mode)
		}
	}
	// Both sidecars without mTLS: plain text, as the netns lab.
	noTLS, err := s.Apply(scenario.Overrides{MTLS: ptr.To(false)})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Objects(specOf(t, noTLS, scenario.BothSidecars))
	if o.PeerAuth.Spec.GetMtls().GetMode().String() != "DISABLE" || o.DestinationRule == nil ||
		o.DestinationRule.Spec.GetTrafficPolicy().GetTls().GetMode().String() != "DISABLE" {
		t.Errorf("both sidecars without mTLS: PeerAuthentication %v, DestinationRule %v", o.PeerAuth.Spec.GetMtls(), o.DestinationRule)
	}
}

func TestCheckModes(t *testing.T) {
	for _, mesh := range []Mesh{MeshMeshperf, MeshIstio} {
		if err := CheckModes(quick(t, scenario.Ambient, scenario.AmbientWaypoint), mesh); err != nil {
			t.Errorf("%s ambient and its waypoint on a cluster: %v", mesh, err)
		}
		for _, m := range []scenario.Mode{scenario.AmbientZtunnel, scenario.AmbientWaypointZtunnel} {
			if err := CheckModes(quick(t, m), mesh); err == nil || !strings.Contains(err.Error(), string(m)) {
				t.Errorf("%s %s on a cluster: %v, want it refused by name", mesh, m, err)
			}
		}
	}
}

// TestPreconditionsOfMeshperfAmbient: meshperf's pilot without its node
// proxy's DaemonSet cannot run the ambient mode, nor a cluster that serves
// no Gateway API Gateways the waypoint, and each says so before creating
// anything.
func TestPreconditionsOfMeshperfAmbient(t *testing.T) {
	s := kubetest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inject.PilotNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": inject.PilotName}
	pilot := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: inject.PilotName, Namespace: inject.PilotNamespace},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "meshperf"}}}}}}
	if _, err := c.AppsV1().Deployments(inject.PilotNamespace).Create(ctx, pilot, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := Run(ctx, Config{Scenario: quick(t, scenario.NoMesh, scenario.Ambient), Kubeconfig: s.Kubeconfig(t), Mesh: MeshMeshperf, OutDir: t.TempDir()})
	var pre PreconditionError
	if want := "DaemonSet meshperf-system/meshperf-node"; !errors.As(err, &pre) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want a precondition naming %s", err, want)
	}

	// With the node proxy and Istio's CRDs, the waypoint still needs the
	// Gateway API.
	node := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: inject.NodeName, Namespace: inject.PilotNamespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pilot.Spec.Template}}
	if _, err := c.AppsV1().DaemonSets(inject.PilotNamespace).Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installIstioCRDs(t, s)
	_, err = Run(ctx, Config{Scenario: quick(t, scenario.AmbientWaypoint), Kubeconfig: s.Kubeconfig(t), Mesh: MeshMeshperf, OutDir: t.TempDir()})
	if want := "gateway.networking.k8s.io/v1"; !errors.As(err, &pre) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want a one-line precondition naming %s", err, want)
	}
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: RunLabel})
	if err != nil || len(nss.Items) != 0 {
		t.Errorf("the refused run created namespaces: %v %v", nss, err)
	}
}

// TestPreconditions: no kubeconfig, no API server, no meshperf pilot, no
// Istio: each one error before anything is created.
func TestPreconditions(t *testing.T) {
	s := kubetest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, kubeconfig string
		mesh             Mesh
		modes            []scenario.Mode
		want             string
	}{
		{"no kubeconfig", filepath.Join(t.TempDir(), "absent"), MeshMeshperf, nil, "no kubeconfig"},
		{"unreachable", unreachable, MeshMeshperf, nil, "did not answer"},
		{"no pilot", s.Kubeconfig(t), MeshMeshperf, nil, "meshperf pilot manifest | kubectl apply -f -"},
		{"no istio injector", s.Kubeconfig(t), MeshIstio, []scenario.Mode{scenario.BothSidecars}, "istio-sidecar-injector"},
		{"no ztunnel", s.Kubeconfig(t), MeshIstio, []scenario.Mode{scenario.Ambient}, "ztunnel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(ctx, Config{Scenario: quick(t, tc.modes...), Kubeconfig: tc.kubeconfig, Mesh: tc.mesh,
				OutDir: t.TempDir()})
			var pre PreconditionError
			if !errors.As(err, &pre) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want a one-line precondition saying %q", err, tc.want)
			}
		})
	}
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: RunLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(nss.Items) != 0 {
		t.Errorf("preconditions created namespaces: %v", nss.Items)
	}
}

// TestPodsNeverReady: the API server alone runs no pod, as a cluster
// without a working node would not: the run ends in one line naming what
// did not come up, and the namespace is deleted.
func TestPodsNeverReady(t *testing.T) {
	s := kubetest.Start(t)
	var out bytes.Buffer
	rep, err := Run(context.Background(), Config{Scenario: quick(t, scenario.NoMesh), Kubeconfig: s.Kubeconfig(t),
		OutDir: t.TempDir(), ReadyTimeout: 2 * time.Second, DeleteWait: time.Second, Out: &out})
	if err == nil || !strings.Contains(err.Error(), "not ready after 2s") || !strings.Contains(err.Error(), "Deployment meshperf-lab-") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line naming the Deployment", err)
	}
	var pre PreconditionError
	if errors.As(err, &pre) {
		t.Errorf("a run-time failure reported as a precondition: %v", err)
	}
	ns, gerr := s.Client(t).CoreV1().Namespaces().Get(context.Background(), rep.NamePrefix, metav1.GetOptions{})
	if gerr == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s not deleted", rep.NamePrefix)
	}
	// No namespace controller here: the namespace stays Terminating, and
	// the lab says so.
	if !strings.Contains(out.String(), "still terminating") {
		t.Errorf("output does not say the namespace is terminating:\n%s", out.String())
	}
}

// TestPodFailures: the states a pod cannot leave end the wait at once with
// what to do: an image the node does not have, a sandbox the node cannot
// create (no CNI). The kubelet's part is played by writing the pod's
// status and event as the kubelet does.
func TestPodFailures(t *testing.T) {
	s := kubetest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		event  *corev1.Event
		want   string
	}{
		{"image never pulled", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			Image: "meshperf.local/meshperf:dev", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}},
			nil, "meshperf image build --out DIR && meshperf image import DIR"},
		{"no CNI", corev1.PodStatus{Phase: corev1.PodPending}, &corev1.Event{Reason: "FailedCreatePodSandBox", Type: "Warning",
			Message: "failed to setup network for sandbox: cni plugin not initialized"}, "no CNI network on the node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := s.NewNamespace(t, nil)
			k := &kubeLab{cfg: Config{ReadyTimeout: 30 * time.Second}.defaults(), c: &Cluster{Kube: c}, render: Render{Namespace: ns}}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server-1", Namespace: ns, Labels: map[string]string{"app": serverName},
				Annotations: map[string]string{ModeAnnotation: string(scenario.NoMesh)}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/meshperf:dev"}}}}
			p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status = tc.status
			if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.event != nil {
				tc.event.ObjectMeta = metav1.ObjectMeta{Name: "server-1.sandbox", Namespace: ns}
				tc.event.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: ns}
				tc.event.LastTimestamp = metav1.Now()
				if _, err := c.CoreV1().Events(ns).Create(ctx, tc.event, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			_, err = k.waitReady(ctx, labPods(serverName, scenario.NoMesh))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod "+ns+"/server-1") {
				t.Fatalf("error %v, want it to name the pod and say %q", err, tc.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("waited %s for a failure that will not mend", time.Since(start))
			}
		})
	}
}

// TestManifestAppliesOnServer: what lab manifest renders is valid for the
// API server (kubectl apply --dry-run=server), for both meshes' sidecar
// modes, with Istio's CRDs installed.
func TestManifestAppliesOnServer(t *testing.T) {
	s := kubetest.Start(t)
	bins := testenv.NeedKubernetes(t)
	ctx := context.Background()
	installIstioCRDs(t, s)
	// The objects go in the lab's namespace, which a dry run would not
	// create for them.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NamespacePrefix + ManifestRunID}}
	c := s.Client(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) })
	kubeconfig := s.Kubeconfig(t)
	for _, mesh := range []Mesh{MeshMeshperf, MeshIstio} {
		sc, err := quick(t).Apply(scenario.Overrides{MTLS: ptr.To(false)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range []*scenario.Scenario{quick(t), sc} {
			b, err := Manifest(sc, mesh, "")
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bins.Path(dist.Kubectl), "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-")
			cmd.Stdin = bytes.NewReader(b)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("mesh %s: kubectl apply --dry-run=server: %v\n%s", mesh, err, out)
			}
			for _, want := range []string{"deployment.apps/client", "peerauthentication.security.istio.io/default"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("mesh %s: kubectl did not apply %s:\n%s", mesh, want, out)
				}
			}
		}
	}
}

// TestContainerSample reads the kubelet's /metrics/resource lines, which
// carry a timestamp after the value.
func TestContainerSample(t *testing.T) {
	const text = `# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="client-1"} 1.5 1764320000123
container_cpu_usage_seconds_total{container="istio-proxy",namespace="ns",pod="client-1"} 2.25 1764320000456
container_memory_working_set_bytes{container="istio-proxy",namespace="ns",pod="client-1"} 4.194304e+06 1764320000456
`
	got, ok := containerSample(text, cpuMetric, "ns", "client-1", "istio-proxy")
	if !ok || got.value != 2.25 || got.at.UnixMilli() != 1764320000456 {
		t.Errorf("istio-proxy CPU: %+v %v", got, ok)
	}
	if got, ok := containerSample(text, memoryMetric, "ns", "client-1", "istio-proxy"); !ok || got.value != 4194304 {
		t.Errorf("istio-proxy memory: %+v %v", got, ok)
	}
	if _, ok := containerSample(text, cpuMetric, "ns", "server-1", "app"); ok {
		t.Error("a sample for a pod that has none")
	}
}

// A sidecar is an istio-proxy container, or (Istio's native sidecars) an
// istio-proxy init container that keeps running; an istio-proxy init
// container that runs to completion is not one.
func TestSidecarMismatchSeesNativeSidecars(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := func(name string, containers, inits []corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: containers, InitContainers: inits}}
	}
	app := corev1.Container{Name: "app"}
	classic := pod("client", []corev1.Container{app, {Name: "istio-proxy"}}, nil)
	native := pod("server", []corev1.Container{app}, []corev1.Container{{Name: "istio-init"}, {Name: "istio-proxy", RestartPolicy: &always}})
	oneShot := pod("server", []corev1.Container{app}, []corev1.Container{{Name: "istio-proxy"}})
	bare := pod("client", []corev1.Container{app}, nil)
	if got := sidecarMismatch(scenario.BothSidecars, classic, native); got != "" {
		t.Errorf("classic client, native server in both-sidecars: %q, want no mismatch", got)
	}
	if got := sidecarMismatch(scenario.BothSidecars, classic, oneShot); !strings.Contains(got, "pod server has no istio-proxy") {
		t.Errorf("a one-shot istio-proxy init container: %q, want the server reported without a sidecar", got)
	}
	if got := sidecarMismatch(scenario.NoMesh, bare, native); !strings.Contains(got, "pod server has a sidecar (istio-proxy) the mode does not want") {
		t.Errorf("native sidecar in no-mesh: %q, want it reported", got)
	}
}

// installIstioCRDs installs Istio's CRDs on the test's API server (a
// second install changes nothing).
func installIstioCRDs(t *testing.T, s *kubetest.Server) {
	t.Helper()
	if _, _, err := pilotkube.InstallManifest(context.Background(), s.RESTConfig(), crdmanifest.Istio, ""); err != nil {
		t.Fatalf("Istio's CRDs: %v", err)
	}
}
