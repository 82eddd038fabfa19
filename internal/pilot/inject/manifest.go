package inject

import (
	"encoding/json"
	"fmt"
	"strconv"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/pilot/ca"
)

// The pilot's ports on Kubernetes, as istiod's.
const (
	PortXDS        = 15010 // plaintext xDS
	PortSecureXDS  = 15012 // TLS xDS and the certificate API
	PortMonitoring = 15014 // /metrics
	PortWebhook    = 15017 // /inject; the Service's 443
	PortAPI        = 8080  // the API and /ready, istiod's 8080
)

// ManifestOptions are `meshperf pilot manifest`'s choices.
type ManifestOptions struct {
	Namespace string // meshperf-system when empty
	// Injection is the injected pods' images and pull policy; the pilot's
	// own image is REPO/meshperf:TAG with the same policy.
	Injection Options
}

// Manifest is everything that deploys the pilot, in the order to apply it:
// its namespace, identity and RBAC (what it reads and writes, nothing
// more), the Deployment, its Service, the injection webhook, and the
// ambient node side (the meshperf-node DaemonSet and its RBAC).
func Manifest(mo ManifestOptions) []runtime.Object {
	ns := mo.Namespace
	if ns == "" {
		ns = PilotNamespace
	}
	o := mo.Injection.withDefaults()
	labels := map[string]string{"app": PilotName}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	cluster := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: labels}
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: PilotName, Namespace: ns}}
	objects := []runtime.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(PilotName)},
		&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: cluster(PilotName), Rules: clusterRules()},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: cluster(PilotName),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: PilotName}, Subjects: subject,
		},
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(PilotName), Rules: []rbacv1.PolicyRule{
			// The CA's root (ca.KubeRootSecretName): read it at start,
			// create it once. Create cannot be limited by name.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ca.KubeRootSecretName}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		}},
		&rbacv1.RoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(PilotName),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: PilotName}, Subjects: subject,
		},
		pilotDeployment(ns, labels, o),
		pilotService(ns, labels),
		WebhookConfiguration(admissionregv1.WebhookClientConfig{
			Service: &admissionregv1.ServiceReference{Namespace: ns, Name: PilotName, Path: ptr.To(WebhookPath), Port: ptr.To(int32(443))},
		}, nil),
	}
	// The ambient node side, after the pilot it connects to.
	return append(objects, nodeObjects(ns, PilotName, o)...)
}

// clusterRules are what the pilot reads cluster-wide (Istio's kinds and
// the service registry's), the CRDs it installs with --install-crds, the
// one webhook configuration whose caBundle it keeps, and token reviews for
// the certificate API, and the waypoints it deploys.
func clusterRules() []rbacv1.PolicyRule {
	// Informers list and watch; the pilot gets none of these by name.
	read := []string{"list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"networking.istio.io"}, Resources: []string{"serviceentries", "workloadentries", "virtualservices", "destinationrules", "gateways", "sidecars"}, Verbs: read},
		{APIGroups: []string{"security.istio.io"}, Resources: []string{"peerauthentications", "authorizationpolicies"}, Verbs: read},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gateways"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces", "nodes"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		// --install-crds: server-side apply of Istio's CRDs (patch, and
		// create for one absent), then get each until Established.
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "create", "patch"}},
		// The caBundle patcher watches its one configuration by name
		// (a metadata.name field selector, which RBAC matches against
		// resourceNames).
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{WebhookConfigName}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		// Waypoints (WaypointDeployer): each waypoint's objects by
		// server-side apply (patch, and create for one absent), and its
		// Gateway's status.
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gateways/status"}, Verbs: []string{"update"}},
		// The root published to every namespace (ca.RootConfigMapName):
		// watched by name, created and kept. Create cannot be limited by
		// name.
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ca.RootConfigMapName}, Verbs: []string{"list", "watch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
	}
}

// PilotArgs are the pilot's flags in its Deployment: istiod's ports on
// every interface, the API (and /ready) on 8080, injection on, CRDs
// installed, the in-cluster API server (no --kubeconfig).
func PilotArgs(o Options) []string {
	port := func(p int) string { return ":" + strconv.Itoa(p) }
	return []string{
		"pilot",
		"--grpcAddr", port(PortXDS),
		"--secureGRPCAddr", port(PortSecureXDS),
		"--monitoringAddr", port(PortMonitoring),
		"--httpAddr", port(PortAPI),
		"--webhookAddr", port(PortWebhook),
		"--dataDir", "/var/lib/meshperf",
		"--install-crds",
		"--image-repo", o.ImageRepo,
		"--tag", o.Tag,
		"--pull-policy", string(o.PullPolicy),
	}
}

func pilotDeployment(ns string, labels map[string]string, o Options) *appsv1.Deployment {
	ports := []corev1.ContainerPort{
		{Name: "grpc-xds", ContainerPort: PortXDS},
		{Name: "tls-xds", ContainerPort: PortSecureXDS},
		{Name: "http-monitoring", ContainerPort: PortMonitoring},
		{Name: "https-webhook", ContainerPort: PortWebhook},
		{Name: "http-api", ContainerPort: PortAPI},
	}
	for i := range ports {
		ports[i].Protocol = corev1.ProtocolTCP
	}
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: metav1.ObjectMeta{Name: PilotName, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// The pilot is never injected, whatever its namespace's label.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": PilotName, "sidecar.istio.io/inject": "false"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: PilotName,
					Containers: []corev1.Container{{
						Name:            "pilot",
						Image:           image.Ref(o.ImageRepo, image.Meshperf, o.Tag),
						ImagePullPolicy: o.PullPolicy,
						Args:            PilotArgs(o),
						// Where the pilot keeps the CA's root Secret.
						Env:   []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}},
						Ports: ports,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(PortAPI)}},
							PeriodSeconds: 2, FailureThreshold: 30, TimeoutSeconds: 3,
						},
						Resources:    resources("100m", "128Mi"),
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/meshperf"}},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser: ptr.To(int64(1337)), RunAsGroup: ptr.To(int64(1337)), RunAsNonRoot: ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					// The store and the CA's working copy; the root itself
					// is kept in the istio-ca-secret Secret.
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

func pilotService(ns string, labels map[string]string) *corev1.Service {
	port := func(name string, port, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(target), Protocol: corev1.ProtocolTCP}
	}
	return &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: metav1.ObjectMeta{Name: PilotName, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports: []corev1.ServicePort{
				port("grpc-xds", PortXDS, PortXDS),
				port("tls-xds", PortSecureXDS, PortSecureXDS),
				port("http-monitoring", PortMonitoring, PortMonitoring),
				port("https-webhook", 443, PortWebhook),
			},
		},
	}
}

// WebhookConfiguration is the injector's MutatingWebhookConfiguration
// calling client (the pilot's Service, or a URL in tests), trusting
// caBundle (nil: the pilot's CABundlePatcher sets it). It selects as
// Istio's two webhooks without revisions do: pods not labelled
// sidecar.istio.io/inject=false in namespaces labelled
// istio-injection=enabled, and pods labelled sidecar.istio.io/inject=true
// in namespaces with no istio-injection label (a per-pod opt-in), on
// CREATE only. failurePolicy is Fail, as Istio's: a pilot that cannot be
// reached must not let pods start without the sidecar they asked for (the
// handler itself admits the pods it cannot inject).
func WebhookConfiguration(client admissionregv1.WebhookClientConfig, caBundle []byte) *admissionregv1.MutatingWebhookConfiguration {
	client.CABundle = caBundle
	webhook := func(name string, namespaces, objects []metav1.LabelSelectorRequirement) admissionregv1.MutatingWebhook {
		return admissionregv1.MutatingWebhook{
			Name:         name,
			ClientConfig: client,
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchExpressions: namespaces},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: objects},
			FailurePolicy:           ptr.To(admissionregv1.Fail),
			SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregv1.NeverReinvocationPolicy),
			TimeoutSeconds:          ptr.To(int32(10)),
		}
	}
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	const nsLabel, podLabel = "istio-injection", "sidecar.istio.io/inject"
	return &admissionregv1.MutatingWebhookConfiguration{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigName, Labels: map[string]string{"app": PilotName}},
		Webhooks: []admissionregv1.MutatingWebhook{
			webhook("namespace."+WebhookName,
				[]metav1.LabelSelectorRequirement{req(nsLabel, metav1.LabelSelectorOpIn, "enabled")},
				[]metav1.LabelSelectorRequirement{req(podLabel, metav1.LabelSelectorOpNotIn, "false")}),
			webhook("object."+WebhookName,
				[]metav1.LabelSelectorRequirement{req(nsLabel, metav1.LabelSelectorOpDoesNotExist)},
				[]metav1.LabelSelectorRequirement{req(podLabel, metav1.LabelSelectorOpIn, "true")}),
		},
	}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// ManifestYAML is the manifest as one YAML stream.
func ManifestYAML(mo ManifestOptions) ([]byte, error) {
	var out []byte
	for i, obj := range Manifest(mo) {
		b, err := ObjectYAML(obj)
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// ObjectYAML is obj as a manifest holds it (kubectl's serialisation of a
// typed object): without the fields a typed object always carries
// but a manifest never sets: its status, an empty spec, and null creation
// timestamps.
func ObjectYAML(obj runtime.Object) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	dropNullTimestamps(m)
	return yaml.Marshal(m)
}

func dropNullTimestamps(v any) {
	switch v := v.(type) {
	case map[string]any:
		if ts, ok := v["creationTimestamp"]; ok && ts == nil {
			delete(v, "creationTimestamp")
		}
		for _, e := range v {
			dropNullTimestamps(e)
		}
	case []any:
		for _, e := range v {
			dropNullTimestamps(e)
		}
	}
}
