package inject

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/image"
)

// The ambient node side: a DaemonSet running, on every node, meshperf's
// node agent (istio-cni's role) and meshperf-proxy as the node proxy
// (ztunnel's role), which share the ZDS socket's directory.
const (
	NodeName           = "meshperf-node"
	NodeServiceAccount = "meshperf-node-proxy" // the identity the CA lets ask for its node's pods
	NodeProxyReadyPort = 15021                 // ztunnel's readiness
	NodeProxyStatsPort = 15020                 // ztunnel's /stats/prometheus
	NodeProxyContainer = "node-proxy"
	zdsDir             = "/var/run/ztunnel"
)

// nodeObjects are the DaemonSet's identity, its RBAC (the agent watches
// pods and namespaces) and the DaemonSet.
func nodeObjects(ns, pilotService string, o Options) []runtime.Object {
	labels := map[string]string{"app": NodeName}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	cluster := metav1.ObjectMeta{Name: NodeName, Labels: labels}
	return []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(NodeServiceAccount)},
		&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: cluster, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: cluster,
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: NodeName},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: NodeServiceAccount, Namespace: ns}},
		},
		nodeDaemonSet(ns, pilotService, labels, o),
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// nodeProxyEnv is the node proxy's configuration, ztunnel's variables as
// the netns lab sets them (internal/lab/nodeproxy.go), with the pilot's TLS
// port for both xDS and the CA, the root from istio-ca-root-cert and the
// DaemonSet's istio-ca token for the CA.
func nodeProxyEnv(pilot string) []corev1.EnvVar {
	val := func(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }
	return []corev1.EnvVar{
		val("XDS_ADDRESS", pilot),
		val("CA_ADDRESS", pilot),
		val("XDS_ROOT_CA", RootCertPath),
		val("CA_ROOT_CA", RootCertPath),
		val("AUTH_TOKEN", TokenPath),
		val("INPOD_UDS", zdsDir+"/ztunnel.sock"),
		val("TRUST_DOMAIN", "cluster.local"),
		val("CLUSTER_ID", "Kubernetes"),
		fieldEnv("NODE_NAME", "spec.nodeName"),
		fieldEnv("INSTANCE_IP", "status.podIP"),
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("POD_NAMESPACE", "metadata.namespace"),
		fieldEnv("SERVICE_ACCOUNT", "spec.serviceAccountName"),
		val("ZTUNNEL_WORKER_THREADS", "2"),
		// No DNS capture: the in-pod rules leave DNS alone.
		val("ISTIO_META_DNS_CAPTURE", "false"),
		val("RUST_LOG", "info"),
	}
}

func nodeDaemonSet(ns, pilotService string, labels map[string]string, o Options) *appsv1.DaemonSet {
	pilot := "https://" + pilotService + "." + ns + ".svc:" + strconv.Itoa(PortSecureXDS)
	zds := corev1.VolumeMount{Name: "zds", MountPath: zdsDir}
	return &appsv1.DaemonSet{
		TypeMeta:   typeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: metav1.ObjectMeta{Name: NodeName, Namespace: ns, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// Never injected, never enrolled: it is the mesh's node side.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": NodeName, "sidecar.istio.io/inject": "false", "istio.io/dataplane-mode": "none"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: NodeServiceAccount,
					// The agent finds pods' network namespaces in the host's /proc.
					HostPID:     true,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{
						{
							Name:            "node-agent",
							Image:           image.Ref(o.ImageRepo, image.Meshperf, o.Tag),
							ImagePullPolicy: o.PullPolicy,
							Args:            []string{"node-agent", "--zds-socket", zdsDir + "/ztunnel.sock"},
							Env:             []corev1.EnvVar{fieldEnv("NODE_NAME", "spec.nodeName")},
							Resources:       resources("10m", "32Mi"),
							VolumeMounts:    []corev1.VolumeMount{zds},
							// Entering other pods' network namespaces and
							// changing their iptables and routes.
							SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To(int64(0))},
						},
						{
							Name:            NodeProxyContainer,
							Image:           image.Ref(o.ImageRepo, image.Proxy, o.Tag),
							ImagePullPolicy: o.PullPolicy,
							Args:            []string{"--proxy-type", "ztunnel"},
							Env:             nodeProxyEnv(pilot),
							Ports: []corev1.ContainerPort{
								{Name: "http-ready", ContainerPort: NodeProxyReadyPort, Protocol: corev1.ProtocolTCP},
								{Name: "http-stats", ContainerPort: NodeProxyStatsPort, Protocol: corev1.ProtocolTCP},
							},
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(NodeProxyReadyPort)}},
								PeriodSeconds: 2, FailureThreshold: 30, TimeoutSeconds: 3,
							},
							Resources: resources("100m", "64Mi"),
							VolumeMounts: []corev1.VolumeMount{zds,
								{Name: TokenVolumeName, MountPath: TokenMountDir, ReadOnly: true},
								{Name: RootCertVolumeName, MountPath: RootCertMountDir, ReadOnly: true},
							},
							// Opening listeners inside pods' namespaces and
							// marking its sockets there, as ztunnel.
							SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), Capabilities: &corev1.Capabilities{
								Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "NET_RAW"},
							}},
						},
					},
					Volumes: []corev1.Volume{
						{Name: "zds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						tokenVolume(), rootCertVolume(),
					},
				},
			},
		},
	}
}
