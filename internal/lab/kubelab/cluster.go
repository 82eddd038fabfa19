package kubelab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	pilotkube "github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/results"
)

// Cluster is a connection to the cluster the lab runs on.
type Cluster struct {
	REST    *rest.Config
	Kube    kubernetes.Interface
	Istio   istioclient.Interface
	Dynamic dynamic.Interface
	Version string // the API server's git version
	// podProxy is Kube for reads through the API server's pod proxy: its
	// requests name localhost as their Host, which the pod proxy passes on
	// to the pod (see localhostHost).
	podProxy kubernetes.Interface
}

// localhostHost names localhost as the Host of every request. The API
// server's pod proxy passes the Host it was asked by on to the pod, and
// meshperf-proxy's admin, as every meshperf server, answers only to an IP
// address, localhost or a name it was given (it refuses other names as DNS
// rebinding), while a kubeconfig may name the API server by any name. The
// API server routes by path, and TLS verifies the name dialled, so
// nothing else sees the difference.
type localhostHost struct{ next http.RoundTripper }

// podProxyClient is a client of cfg's API server whose requests name
// localhost as their Host.
func podProxyClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return localhostHost{rt} })
	return kubernetes.NewForConfig(cfg)
}

func (l localhostHost) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = "localhost"
	return l.next.RoundTrip(req)
}

// Connect reads the kubeconfig at path and checks the API server answers;
// both failures are preconditions.
func Connect(ctx context.Context, path string) (*Cluster, error) {
	cfg, err := pilotkube.RESTConfig(path, os.Getenv)
	if err != nil {
		return nil, PreconditionError{err}
	}
	cfg.UserAgent = "meshperf-lab"
	c := &Cluster{REST: cfg}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, precondition("kubeconfig: %v", err)
	}
	if c.podProxy, err = podProxyClient(cfg); err != nil {
		return nil, precondition("kubeconfig: %v", err)
	}
	if c.Istio, err = istioclient.NewForConfig(cfg); err != nil {
		return nil, precondition("kubeconfig: %v", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, precondition("kubeconfig: %v", err)
	}
	if err := pilotkube.Reachable(ctx, c.Kube, cfg.Host, pilotkube.DefaultReachTimeout); err != nil {
		return nil, PreconditionError{err}
	}
	v, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return nil, precondition("the Kubernetes API server at %s: version: %v", cfg.Host, err)
	}
	c.Version = v.GitVersion
	return c, nil
}

// Istio's control plane on a cluster.
const (
	istioNamespace       = "istio-system"
	istioInjectorWebhook = "istio-sidecar-injector"
	istiodName           = "istiod"
	ztunnelName          = "ztunnel"
)

// Preflight checks that the mesh the scenario's modes need is installed,
// before anything is created: meshperf's pilot and its injector, or
// Istio's injector (sidecar modes) and ztunnel (ambient modes). A scenario
// of no-mesh only needs neither.
func (c *Cluster) Preflight(ctx context.Context, s *scenario.Scenario, mesh Mesh) error {
	sidecars, ambient, waypoint, meshModes := false, false, false, false
	for _, m := range s.Modes {
		meshModes = meshModes || m != scenario.NoMesh
		cl, sv := m.Sidecars()
		sidecars = sidecars || cl || sv
		ambient = ambient || m.NodeProxies()
		waypoint = waypoint || m.Waypoint()
	}
	webhooks := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	switch {
	case mesh == MeshMeshperf && (sidecars || ambient):
		if _, err := c.Kube.AppsV1().Deployments(inject.PilotNamespace).Get(ctx, inject.PilotName, metav1.GetOptions{}); err != nil {
			return c.missing(err, "meshperf's pilot (Deployment %s/%s) is not installed: meshperf pilot manifest | kubectl apply -f -", inject.PilotNamespace, inject.PilotName)
		}
		if _, err := webhooks.Get(ctx, inject.WebhookConfigName, metav1.GetOptions{}); sidecars && err != nil {
			return c.missing(err, "meshperf's sidecar injector (MutatingWebhookConfiguration %s) is not installed: meshperf pilot manifest | kubectl apply -f -", inject.WebhookConfigName)
		}
		if _, err := c.Kube.AppsV1().DaemonSets(inject.PilotNamespace).Get(ctx, inject.NodeName, metav1.GetOptions{}); ambient && err != nil {
			return c.missing(err, "meshperf's node proxy (DaemonSet %s/%s) is not installed: meshperf pilot manifest | kubectl apply -f -", inject.PilotNamespace, inject.NodeName)
		}
	case mesh == MeshIstio && sidecars:
		if _, err := webhooks.Get(ctx, istioInjectorWebhook, metav1.GetOptions{}); err != nil {
			return c.missing(err, "Istio's sidecar injector (MutatingWebhookConfiguration %s) is not installed: install Istio (istioctl install), or run with --mesh meshperf", istioInjectorWebhook)
		}
	}
	if mesh == MeshIstio && ambient {
		if _, err := c.Kube.AppsV1().DaemonSets(istioNamespace).Get(ctx, ztunnelName, metav1.GetOptions{}); err != nil {
			return c.missing(err, "Istio's ambient mode is not installed (no DaemonSet %s/%s): istioctl install --set profile=ambient, or -modes without the ambient ones", istioNamespace, ztunnelName)
		}
	}
	if meshModes {
		if _, err := c.Kube.Discovery().ServerResourcesForGroupVersion("security.istio.io/v1"); err != nil {
			return c.missing(err, "Istio's CRDs (security.istio.io/v1) are not installed: meshperf pilot --install-crds installs them (its manifest runs it so), or install Istio")
		}
	}
	// The waypoint is declared by a Gateway, which the control plane
	// deploys: the kind must be served, and the control plane must have
	// seen it served when it started.
	if waypoint {
		if _, err := c.Kube.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1"); err != nil {
			return c.missing(err, "the Gateway API's CRDs (gateway.networking.k8s.io/v1) are not installed, and a waypoint is a Gateway: meshperf pilot --install-crds installs the Gateway CRD (its manifest runs it so; restart an older pilot), or install the Gateway API's CRDs and restart the control plane")
		}
	}
	return nil
}

// missing turns a failed Get into a precondition: what is missing when it
// is not found, else why it could not be read (RBAC, most likely).
func (c *Cluster) missing(err error, format string, args ...any) error {
	if apierrors.IsNotFound(err) {
		return precondition(format, args...)
	}
	return precondition("cannot check the cluster at %s: %v", c.REST.Host, err)
}

// describe is the cluster as the lab names it: API server, version, nodes.
func (c *Cluster) describe() string {
	return fmt.Sprintf("%s (Kubernetes %s)", c.REST.Host, c.Version)
}

// provenance is what each run records about the cluster and the mesh: the
// machine is the cluster (its API server, version and nodes, and the
// nodes' CPUs, memory and kernel), the control and data planes the mesh's,
// by the versions of the images they run.
func (c *Cluster) provenance(ctx context.Context, cfg Config) (modeProvenance, error) {
	hash, err := lab.ScenarioParamsHash(cfg.Scenario)
	if err != nil {
		return modeProvenance{}, fmt.Errorf("lab: %w", err)
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return modeProvenance{}, precondition("cannot list the cluster's nodes at %s: %v", c.REST.Host, err)
	}
	m := results.Machine{}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		m.CPUs += int(n.Status.Capacity.Cpu().Value())
		m.MemoryMB += int(n.Status.Capacity.Memory().Value() >> 20)
		if m.Kernel == "" {
			m.Kernel = "Linux " + n.Status.NodeInfo.KernelVersion
		}
	}
	m.Hostname = fmt.Sprintf("kubernetes %s at %s, nodes %s", c.Version, c.REST.Host, strings.Join(names, " "))
	p := modeProvenance{common: results.Provenance{Meshperf: results.ThisBuild(), ParamsHash: hash, Labels: cfg.Labels, Machine: m}}
	switch cfg.Mesh {
	case MeshMeshperf:
		tag := c.imageTag(ctx, inject.PilotNamespace, inject.PilotName)
		p.control = results.Component{Name: results.ComponentPilot, Version: tag}
		p.data = results.Component{Name: results.ComponentProxy, Version: tag}
	case MeshIstio:
		tag := c.imageTag(ctx, istioNamespace, istiodName)
		p.control = results.Component{Name: "istiod", Version: tag}
		p.data = results.Component{Name: "istio-proxy", Version: tag}
	}
	return p, nil
}

// imageTag is the tag of the first container image of Deployment ns/name,
// "unknown" when it cannot be read.
func (c *Cluster) imageTag(ctx context.Context, ns, name string) string {
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		return "unknown"
	}
	img := d.Spec.Template.Spec.Containers[0].Image
	if i := strings.LastIndexByte(img, ':'); i > strings.LastIndexByte(img, '/') {
		return img[i+1:]
	}
	return "unknown"
}

// modeProvenance is the invocation's provenance, per mode as the netns
// lab's: no mesh at all in no-mesh.
type modeProvenance struct {
	common        results.Provenance
	control, data results.Component
}

func (p modeProvenance) forMode(m scenario.Mode) results.Provenance {
	out := p.common
	if m != scenario.NoMesh {
		out.ControlPlane, out.DataPlane = p.control, p.data
	}
	return out
}
