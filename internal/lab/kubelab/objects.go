package kubelab

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	networkingapi "istio.io/api/networking/v1alpha3"
	securityapi "istio.io/api/security/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// Istio's labels and annotations that choose a mode, as Istio's benchmark
// sets them.
const (
	injectionLabel     = "istio-injection"         // namespace: the sidecar injector selects it
	injectAnnotation   = "sidecar.istio.io/inject" // pod: "true" or "false"
	dataplaneModeLabel = "istio.io/dataplane-mode" // namespace: ambient
	useWaypointLabel   = "istio.io/use-waypoint"   // Service: its waypoint
	waypointForLabel   = "istio.io/waypoint-for"   // Gateway: what the waypoint serves
	waypointClass      = "istio-waypoint"
)

// Labels meshperf puts on what it creates, so that a cleanup can find an
// interrupted run's namespaces (kubectl delete ns -l meshperf.io/lab).
const (
	RunLabel       = "meshperf.io/lab"      // the run id
	ModeAnnotation = "meshperf.io/lab-mode" // pod template: the mode its pods were made for
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "meshperf"
)

// NamespacePrefix starts every namespace the lab creates; the run id ends it.
const NamespacePrefix = "meshperf-lab-"

// Deployment, Service and ServiceAccount names: the netns lab's.
const (
	clientName = lab.ClientPod
	serverName = lab.ServerPod
)

// Mesh is whose mesh a run measures.
type Mesh string

const (
	MeshMeshperf Mesh = "meshperf" // meshperf pilot and meshperf-proxy (meshperf pilot manifest)
	MeshIstio    Mesh = "istio"    // the cluster's Istio
)

// ParseMesh reads --mesh.
func ParseMesh(v string) (Mesh, error) {
	switch Mesh(v) {
	case MeshMeshperf, MeshIstio:
		return Mesh(v), nil
	}
	return "", fmt.Errorf("--mesh %q: want meshperf or istio", v)
}

// Objects are what one mode's runs need in the namespace.
type Objects struct {
	Namespace       *corev1.Namespace
	ServiceAccounts []*corev1.ServiceAccount
	Service         *corev1.Service
	Server, Client  *appsv1.Deployment
	PeerAuth        *securityv1.PeerAuthentication // nil in no-mesh, which needs no mesh installed
	DestinationRule *networkingv1.DestinationRule  // nil unless both sidecars run without mTLS
	Waypoint        *gatewayv1.Gateway             // nil without a waypoint
}

// List is every object in the order they are applied.
func (o Objects) List() []runtime.Object {
	out := []runtime.Object{o.Namespace}
	for _, sa := range o.ServiceAccounts {
		out = append(out, sa)
	}
	out = append(out, o.Service, o.Server, o.Client)
	if o.PeerAuth != nil {
		out = append(out, o.PeerAuth)
	}
	if o.DestinationRule != nil {
		out = append(out, o.DestinationRule)
	}
	if o.Waypoint != nil {
		out = append(out, o.Waypoint)
	}
	return out
}

// Render are spec's objects in namespace ns for run runID, with images from
// repo (pulled as pull says).
type Render struct {
	Namespace, RunID, ImageRepo string
	Mesh                        Mesh
	Pull                        corev1.PullPolicy
}

// Objects are the objects of spec's mode.
func (r Render) Objects(spec scenario.RunSpec) Objects {
	client, server := spec.Mode.Sidecars()
	o := Objects{
		Namespace: r.namespace(spec.Mode),
		ServiceAccounts: []*corev1.ServiceAccount{
			{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: r.meta(lab.ClientSA)},
			{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: r.meta(lab.ServerSA)},
		},
		Service: r.service(spec.Mode),
		Server: r.deployment(serverName, lab.ServerSA, spec, server,
			[]string{"server", "-http-port", strconv.Itoa(lab.ServiceHTTPPort), "-grpc-port", strconv.Itoa(lab.ServiceGRPCPort),
				"-tcp-port", strconv.Itoa(lab.ServiceTCPPort)}),
		// The client idles; each run's load is exec'd in it, as Istio's
		// benchmark execs fortio in its client pod.
		Client: r.deployment(clientName, lab.ClientSA, spec, client, []string{"pause"}),
	}
	if spec.Mode != scenario.NoMesh {
		o.PeerAuth = r.peerAuth(spec)
	}
	o.Server.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{
		{Name: "http", ContainerPort: lab.ServiceHTTPPort}, {Name: "grpc", ContainerPort: lab.ServiceGRPCPort},
		{Name: "tcp", ContainerPort: lab.ServiceTCPPort}}
	if lab.PeerAuthMode(spec) == "DISABLE" {
		o.DestinationRule = r.destinationRule()
	}
	if spec.Mode.Waypoint() {
		o.Waypoint = r.waypoint()
	}
	return o
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func (r Render) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.Namespace, Labels: map[string]string{RunLabel: r.RunID, managedByLabel: managedBy}}
}

// namespace is labelled for injection only when the mode has a sidecar,
// and for ambient only in an ambient mode: the namespace's labels are what
// Istio's benchmark changes between modes, and a label left on in a mode
// that does not want it would enrol pods the per-pod annotation does not
// cover (the injector's namespace webhook sees every pod of a labelled
// namespace; the annotation then says yes or no per Deployment).
func (r Render) namespace(m scenario.Mode) *corev1.Namespace {
	meta := r.meta(r.Namespace)
	meta.Namespace = ""
	if c, s := m.Sidecars(); c || s {
		meta.Labels[injectionLabel] = "enabled"
	}
	if m.NodeProxies() {
		meta.Labels[dataplaneModeLabel] = "ambient"
	}
	return &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: meta}
}

func (r Render) service(m scenario.Mode) *corev1.Service {
	meta := r.meta(lab.ServerService)
	if m.Waypoint() {
		meta.Labels[useWaypointLabel] = lab.WaypointGateway
	}
	port := func(name string, p int) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: int32(p), TargetPort: intstr.FromInt(p), Protocol: corev1.ProtocolTCP}
	}
	return &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": serverName},
		// Named so that the mesh picks each port's protocol from its name,
		// as the netns lab's Service.
		Ports: []corev1.ServicePort{port("http", lab.ServiceHTTPPort), port("grpc", lab.ServiceGRPCPort), port("tcp", lab.ServiceTCPPort)},
	}}
}

// deployment runs meshperf with args as app, with a sidecar when sidecar
// says so: the pod annotation sidecar.istio.io/inject, as Istio's
// benchmark chooses per Deployment. The mode's name in the pod template
// rolls the pods on every mode change, so that no pod of one mode serves
// the next.
func (r Render) deployment(app, sa string, spec scenario.RunSpec, sidecar bool, args []string) *appsv1.Deployment {
	labels := map[string]string{"app": app, RunLabel: r.RunID}
	annotations := map[string]string{injectAnnotation: strconv.FormatBool(sidecar), ModeAnnotation: string(spec.Mode)}
	if sidecar && spec.ProxyConcurrency > 0 {
		annotations["proxy.istio.io/config"] = fmt.Sprintf("concurrency: %d", spec.ProxyConcurrency)
	}
	if sidecar && spec.ProxyCPULimit > 0 {
		limit := int64(math.Round(spec.ProxyCPULimit * 1000))
		annotations["sidecar.istio.io/proxyCPULimit"] = resource.NewMilliQuantity(limit, resource.DecimalSI).String()
		// The request too, never above the limit: an injector's default
		// request (Istio's 100m) over a smaller limit makes the pod invalid.
		annotations["sidecar.istio.io/proxyCPU"] = resource.NewMilliQuantity(min(limit, 100), resource.DecimalSI).String()
	}
	meta := r.meta(app)
	return &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		// One pod at a time: the old mode's pod goes before the new one
		// is counted, so a ready Deployment is the new mode's.
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{
				ServiceAccountName:            sa,
				TerminationGracePeriodSeconds: ptr.To(int64(5)),
				Containers: []corev1.Container{{
					Name: "app", Image: image.Ref(r.ImageRepo, image.Meshperf, ""), ImagePullPolicy: r.Pull,
					Command: []string{image.BinaryPath}, Args: args,
					// Requests, so that every mode's pods are of one QoS
					// class (Burstable): without them the no-mesh pods
					// would be BestEffort, whose CPU share on a busy node
					// is a sliver of a sidecar mode's, and the baseline
					// would be measured under other rules.
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		},
	}}
}

func (r Render) peerAuth(spec scenario.RunSpec) *securityv1.PeerAuthentication {
	mode := securityapi.PeerAuthentication_MutualTLS_Mode_value[lab.PeerAuthMode(spec)]
	return &securityv1.PeerAuthentication{TypeMeta: typeMeta("security.istio.io/v1", "PeerAuthentication"), ObjectMeta: r.meta("default"),
		Spec: securityapi.PeerAuthentication{Mtls: &securityapi.PeerAuthentication_MutualTLS{
			Mode: securityapi.PeerAuthentication_MutualTLS_Mode(mode)}}}
}

// destinationRule turns the client sidecar's TLS off, as the netns lab
// does when both sidecars run without mTLS.
func (r Render) destinationRule() *networkingv1.DestinationRule {
	return &networkingv1.DestinationRule{TypeMeta: typeMeta("networking.istio.io/v1", "DestinationRule"), ObjectMeta: r.meta(lab.ServerService),
		Spec: networkingapi.DestinationRule{Host: ServerHost(r.Namespace), TrafficPolicy: &networkingapi.TrafficPolicy{
			Tls: &networkingapi.ClientTLSSettings{Mode: networkingapi.ClientTLSSettings_DISABLE}}}}
}

// waypoint is Istio's waypoint for services: a Gateway of class
// istio-waypoint listening for HBONE on 15008.
func (r Render) waypoint() *gatewayv1.Gateway {
	meta := r.meta(lab.WaypointGateway)
	meta.Labels[waypointForLabel] = "service"
	return &gatewayv1.Gateway{TypeMeta: typeMeta("gateway.networking.k8s.io/v1", "Gateway"), ObjectMeta: meta,
		Spec: gatewayv1.GatewaySpec{GatewayClassName: waypointClass, Listeners: []gatewayv1.Listener{
			{Name: "mesh", Port: 15008, Protocol: "HBONE"}}}}
}

// ServerHost is the server Service's name in namespace ns.
func ServerHost(ns string) string { return lab.ServerService + "." + ns + ".svc.cluster.local" }

// SPIFFEID is service account sa's identity in namespace ns.
func SPIFFEID(ns, sa string) string { return "spiffe://cluster.local/ns/" + ns + "/sa/" + sa }

// Identities are the names the traffic checks look for in namespace ns.
func Identities(ns string) lab.Identities {
	return lab.Identities{ServerHost: ServerHost(ns), Client: SPIFFEID(ns, lab.ClientSA), Waypoint: SPIFFEID(ns, lab.WaypointSA)}
}

// modeList names modes for messages.
func modeList(ms []scenario.Mode) string {
	var s []string
	for _, m := range ms {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}
