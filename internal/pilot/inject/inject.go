// Package inject is the control plane's sidecar injector, the counterpart of
// istiod's: a mutating admission webhook (/inject) that adds to a pod the
// capture init container (istio-init, running `meshperf capture`, the rules
// the lab's pods get) and the sidecar (istio-proxy, meshperf-proxy) with the
// pod's identity, and writes Istio's sidecar.istio.io/status annotation. Which
// namespaces are injected is the MutatingWebhookConfiguration's
// namespaceSelector (istio-injection=enabled), as with Istio; the handler
// applies the per-pod policy (label or annotation sidecar.istio.io/inject,
// host networking, system namespaces). The webhook's configuration is kept
// trusting the pilot's root by CABundlePatcher. The package also deploys
// the mesh's other in-cluster proxies with the same container spec: the
// waypoints (WaypointDeployer), and renders the pilot's manifest.
package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"istio.io/api/annotation"
	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/lab/pod"
)

// Names shared with Istio's injection, which tools and dashboards look for.
const (
	InitContainerName  = "istio-init"
	ProxyContainerName = "istio-proxy"
	// TokenVolumeName is the projected service-account token the proxy
	// presents to the CA, at TokenPath, for the audience TokenAudience.
	TokenVolumeName = "istio-token"
	TokenMountDir   = "/var/run/secrets/tokens"
	TokenPath       = TokenMountDir + "/istio-token"
	TokenAudience   = "istio-ca"
	// tokenLifetime is Istio's: istio-agent's token is re-read as the kubelet rotates it.
	tokenLifetime = 43200
	// RootCertVolumeName is Istio's volume of the mesh root, from the
	// ConfigMap RootCertConfigMap the control plane publishes in every
	// namespace; the sidecar verifies the CA with it, at RootCertPath.
	RootCertVolumeName = "istiod-ca-cert"
	RootCertConfigMap  = "istio-ca-root-cert"
	RootCertMountDir   = "/var/run/secrets/istio"
	RootCertPath       = RootCertMountDir + "/root-cert.pem"
)

// The control plane's names on Kubernetes (the contract of issue 20).
const (
	PilotNamespace      = "meshperf-system"
	PilotName           = "meshperf-pilot" // Deployment, Service and ServiceAccount
	WebhookConfigName   = "meshperf-sidecar-injector"
	WebhookName         = "sidecar-injector.meshperf.io"
	WebhookPath         = "/inject"
	DefaultPilotAddress = PilotName + "." + PilotNamespace + ".svc:15010"
	DefaultCAAddress    = "https://" + PilotName + "." + PilotNamespace + ".svc:15012"
	// WebhookServiceName is the name the webhook's serving certificate is
	// for, in the default namespace (ServiceHost in another).
	WebhookServiceName = PilotName + "." + PilotNamespace + ".svc"
)

// ServiceHost is the pilot's Service's name in namespace: what the API
// server calls the webhook at and the sidecars' xDS host.
func ServiceHost(namespace string) string { return PilotName + "." + namespace + ".svc" }

// Sidecar ports, as Istio's.
const (
	// ProxyAdminPort is meshperf-proxy's admin API, where its /ready is
	// served; capture leaves it alone (pod.StandardInboundExcludes).
	ProxyAdminPort = 15000
)

// IgnoredNamespaces are never injected, whatever their labels, nor given
// the root ConfigMap: Istio's list.
var IgnoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// Options are what every injected pod shares.
type Options struct {
	// ImageRepo and Tag name the images: REPO/meshperf:TAG for the init
	// container, REPO/meshperf-proxy:TAG for the sidecar.
	ImageRepo, Tag string
	// PullPolicy of both containers: IfNotPresent when empty; Never for a
	// local cluster whose images were imported into the node.
	PullPolicy corev1.PullPolicy
	// PilotAddress is the plaintext xDS address the sidecar connects to.
	PilotAddress string
	// CAAddress is the certificate API (https://HOST:PORT) the sidecar gets
	// its certificate from with its token.
	CAAddress string
	// TrustDomain is the mesh's (mesh config trustDomain; DefaultTrustDomain
	// when empty), passed to the sidecar as TRUST_DOMAIN, as Istio's
	// injector does: the identity the sidecar asks the CA for, and the
	// one its peers must have, are in it.
	TrustDomain string
}

// DefaultTrustDomain is Istio's default trust domain.
const DefaultTrustDomain = "cluster.local"

func (o Options) withDefaults() Options {
	if o.ImageRepo == "" {
		o.ImageRepo = image.DefaultRepo
	}
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if o.PilotAddress == "" {
		o.PilotAddress = DefaultPilotAddress
	}
	if o.CAAddress == "" {
		o.CAAddress = DefaultCAAddress
	}
	if o.TrustDomain == "" {
		o.TrustDomain = DefaultTrustDomain
	}
	return o
}

// ErrCannotInject marks a pod the injector cannot give a sidecar that would
// honour everything the pod asks of it (an annotation meshperf's capture
// does not support, a malformed port list, a pod already carrying
// Istio's containers): the webhook admits it without a sidecar.
var ErrCannotInject = errors.New("cannot inject")

func cannot(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCannotInject, fmt.Sprintf(format, args...))
}

// Required applies Istio's per-pod policy for a pod whose namespace the
// webhook selected: no host-network pods (capture would rewrite the node's
// rules), no system namespaces, no pod already injected, and the label
// sidecar.istio.io/inject (or, without it, the annotation) "false" opts out.
// It returns why a pod is skipped.
func Required(p *corev1.Pod) (bool, string) {
	switch {
	case p.Spec.HostNetwork:
		return false, "host network"
	case slices.Contains(IgnoredNamespaces, p.Namespace):
		return false, "system namespace " + p.Namespace
	case p.Annotations[annotation.SidecarStatus.Name] != "":
		return false, "already injected"
	}
	choice := p.Annotations[annotation.SidecarInject.Name]
	if v, ok := p.Labels[label.SidecarInject.Name]; ok { // the label wins, as in Istio
		choice = v
	}
	if choice == "false" {
		return false, label.SidecarInject.Name + "=false"
	}
	return true, ""
}

// status is the sidecar.istio.io/status annotation, as Istio writes it:
// what was added, so that tools (istioctl, uninjection) can find it.
type status struct {
	InitContainers   []string `json:"initContainers"`
	Containers       []string `json:"containers"`
	Volumes          []string `json:"volumes"`
	ImagePullSecrets []string `json:"imagePullSecrets"`
	Revision         string   `json:"revision"`
}

// Sidecar returns the containers, volume and annotation injection adds to
// p, or an error wrapping ErrCannotInject.
func (o Options) Sidecar(p *corev1.Pod) (*Injection, error) {
	o = o.withDefaults()
	if o.Tag == "" {
		return nil, errors.New("inject: no image tag")
	}
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name == InitContainerName || c.Name == ProxyContainerName {
			return nil, cannot("the pod already has a container named %s", c.Name)
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == TokenVolumeName || v.Name == RootCertVolumeName {
			return nil, cannot("the pod already has a volume named %s", v.Name)
		}
	}
	capture, err := CaptureOptionsOf(p.Annotations)
	if err != nil {
		return nil, err
	}
	settings, err := proxySettingsOf(p.Annotations)
	if err != nil {
		return nil, err
	}
	st, err := json.Marshal(status{
		InitContainers: []string{InitContainerName},
		Containers:     []string{ProxyContainerName},
		Volumes:        []string{TokenVolumeName, RootCertVolumeName},
		Revision:       "default",
	})
	if err != nil {
		return nil, err
	}
	return &Injection{
		Init:    o.initContainer(capture),
		Proxy:   o.proxyContainer(p, settings, sidecarArgs...),
		Volumes: []corev1.Volume{tokenVolume(), rootCertVolume()},
		Status:  string(st),
		Labels:  sidecarLabels(p),
	}, nil
}

// Injection is what Sidecar adds to a pod.
type Injection struct {
	Init, Proxy corev1.Container
	Volumes     []corev1.Volume
	Status      string // the sidecar.istio.io/status annotation
	// Labels are the labels Istio's injector gives the pod, those it does
	// not have already: security.istio.io/tlsMode=istio, on which every
	// client's auto mTLS keys (the endpoint has a sidecar), and the
	// canonical service name and revision, which the telemetry reports.
	Labels map[string]string
}

// sidecarLabels are the labels injection adds to p (see Injection.Labels),
// derived as Istio derives them: the canonical name from the pod's
// app.kubernetes.io/name or app label, else its workload's name; the
// revision from app.kubernetes.io/version or version, else "latest".
func sidecarLabels(p *corev1.Pod) map[string]string {
	first := func(fallback string, keys ...string) string {
		for _, k := range keys {
			if v := p.Labels[k]; v != "" {
				return v
			}
		}
		return fallback
	}
	want := map[string]string{
		label.SecurityTlsMode.Name:          "istio",
		label.ServiceCanonicalName.Name:     first(WorkloadName(p), "app.kubernetes.io/name", "app"),
		label.ServiceCanonicalRevision.Name: first("latest", "app.kubernetes.io/version", "version"),
	}
	out := map[string]string{}
	for k, v := range want {
		if _, ok := p.Labels[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// HasSidecar reports whether p runs the mesh's proxy: an istio-proxy
// container, or a native sidecar (Istio's default since 1.27 on Kubernetes
// 1.29 and later), an init container of that name that keeps running.
func HasSidecar(p *corev1.Pod) bool {
	named := func(c corev1.Container) bool { return c.Name == ProxyContainerName }
	native := func(c corev1.Container) bool {
		return named(c) && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	}
	return slices.ContainsFunc(p.Spec.Containers, named) || slices.ContainsFunc(p.Spec.InitContainers, native)
}

// ServiceAccount is the service account p runs as: the one it names, or
// its namespace's "default".
func ServiceAccount(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName == "" {
		return "default"
	}
	return p.Spec.ServiceAccountName
}

// WorkloadName is the name of the workload p belongs to, as Istio reports
// it: a Deployment's pod, owned by a ReplicaSet named DEPLOYMENT-HASH with
// the label pod-template-hash=HASH, belongs to DEPLOYMENT; any other owned
// pod to its owner; a pod of its own to itself (its name, or the prefix it
// is generated from).
func WorkloadName(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if hash := p.Labels["pod-template-hash"]; ref.Kind == "ReplicaSet" && hash != "" {
			if d, ok := strings.CutSuffix(ref.Name, "-"+hash); ok && d != "" {
				return d
			}
		}
		return ref.Name
	}
	if p.Name != "" {
		return p.Name
	}
	return strings.TrimSuffix(p.GenerateName, "-")
}

// initContainer runs meshperf's own capture as root with the two
// capabilities iptables needs, and nothing else, as Istio's istio-init.
func (o Options) initContainer(capture pod.CaptureOptions) corev1.Container {
	return corev1.Container{
		Name:            InitContainerName,
		Image:           image.Ref(o.ImageRepo, image.Meshperf, o.Tag),
		ImagePullPolicy: o.PullPolicy,
		Args:            append([]string{"capture"}, CaptureArgs(capture)...),
		Resources:       resources("10m", "10Mi"),
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To(int64(0)),
			RunAsGroup:               ptr.To(int64(0)),
			RunAsNonRoot:             ptr.To(false),
			Privileged:               ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			// Writable, as Istio's istio-init: iptables-legacy takes its
			// lock in /run/xtables.lock.
			ReadOnlyRootFilesystem: ptr.To(false),
			Capabilities: &corev1.Capabilities{
				Add:  []corev1.Capability{"NET_ADMIN", "NET_RAW"},
				Drop: []corev1.Capability{"ALL"},
			},
		},
	}
}

// proxyContainer is meshperf-proxy with the flags the lab gives a sidecar,
// its identity from the downward API (the proxy reads Istio's variable
// names), the labels the pod has at admission, and readiness on its admin
// port's /ready (bound to the pod's IP, as in the lab, so the kubelet
// reaches it), and the worker threads and resources the pod asks for.
// roleArgs are the flags that make it a sidecar (captureArgs) or a
// waypoint (waypointArgs).
func (o Options) proxyContainer(p *corev1.Pod, settings proxySettings, roleArgs ...string) corev1.Container {
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	return corev1.Container{
		Name:            ProxyContainerName,
		Image:           image.Ref(o.ImageRepo, image.Proxy, o.Tag),
		ImagePullPolicy: o.PullPolicy,
		// The certificate from the CA, not SDS: the CA checks the token,
		// where SDS would believe the identity the sidecar claims.
		Args: append([]string{
			"--xds-address", o.PilotAddress,
			"--ca-address", o.CAAddress,
			"--ca-root-ca", RootCertPath,
			"--auth-token", TokenPath,
			"--admin-address", "$(INSTANCE_IP):" + strconv.Itoa(ProxyAdminPort),
		}, roleArgs...),
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: field("metadata.name")},
			{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
			{Name: "INSTANCE_IP", ValueFrom: field("status.podIP")},
			{Name: "SERVICE_ACCOUNT", ValueFrom: field("spec.serviceAccountName")},
			{Name: "NODE_NAME", ValueFrom: field("spec.nodeName")},
			{Name: "TRUST_DOMAIN", Value: o.TrustDomain},
			{Name: "LABELS", Value: labelList(withLabels(p.Labels, sidecarLabels(p)))},
			// The workload its telemetry names (source_workload and
			// destination_workload): the Deployment, not the pod.
			{Name: "WORKLOAD_NAME", Value: WorkloadName(p)},
			{Name: "ISTIO_META_CONCURRENCY", Value: settings.concurrencyEnv()},
		},
		Ports:     []corev1.ContainerPort{{Name: "http-admin", ContainerPort: ProxyAdminPort, Protocol: corev1.ProtocolTCP}},
		Resources: settings.resources,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(ProxyAdminPort)}},
			PeriodSeconds:    2,
			FailureThreshold: 30,
			TimeoutSeconds:   3,
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To(int64(pod.DefaultProxyUID)),
			RunAsGroup:               ptr.To(int64(pod.DefaultProxyGID)),
			RunAsNonRoot:             ptr.To(true),
			Privileged:               ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: TokenVolumeName, MountPath: TokenMountDir, ReadOnly: true},
			{Name: RootCertVolumeName, MountPath: RootCertMountDir, ReadOnly: true},
		},
	}
}

// sidecarArgs make meshperf-proxy a sidecar capturing its pod's traffic
// (the init container's rules send it there).
var sidecarArgs = []string{"--capture-mode", "iptables"}

// tokenVolume is Istio's istio-token: a service-account token for the
// audience istio-ca, which the certificate API accepts and nothing else does.
func tokenVolume() corev1.Volume {
	return corev1.Volume{Name: TokenVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: TokenAudience, ExpirationSeconds: ptr.To(int64(tokenLifetime)), Path: "istio-token",
		}}},
	}}}
}

// rootCertVolume is Istio's istiod-ca-cert: the mesh root from the
// ConfigMap the control plane keeps in the pod's namespace.
func rootCertVolume() corev1.Volume {
	return corev1.Volume{Name: RootCertVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: RootCertConfigMap},
	}}}
}

func resources(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// withLabels is labels with added's over them, a new map.
func withLabels(labels, added map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, added)
	return out
}

// labelList is the proxy's --labels form, k=v,k=v, sorted.
func labelList(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}
