package kubelab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/results"
)

// appContainer is the lab's own container in both pods.
const appContainer = "app"

// Where each mesh's sidecar serves its Prometheus metrics: meshperf-proxy
// on its admin port, Istio's sidecar on its merged-metrics port.
var proxyMetrics = map[Mesh]struct {
	port int
	path string
}{
	MeshMeshperf: {inject.ProxyAdminPort, "stats/prometheus"},
	MeshIstio:    {15090, "stats/prometheus"},
}

func (k *kubeLab) failed(spec scenario.RunSpec, reason string) lab.Outcome {
	r := k.base(spec)
	r.Failed, r.FailureReason = true, reason
	return lab.Outcome{Run: r}
}

func (k *kubeLab) base(spec scenario.RunSpec) results.Run {
	return lab.BaseRun(spec, k.cfg.RunID, pod.KindKubernetes, k.prov.forMode(spec.Mode))
}

// runOne execs the load generator in the client pod, samples every
// container over the steady window, and checks the sidecars' counters.
func (k *kubeLab) runOne(ctx context.Context, spec scenario.RunSpec) lab.Outcome {
	r := k.base(spec)
	before, err := k.scrape(ctx)
	if err != nil {
		return k.failed(spec, err.Error())
	}
	target, err := k.target(ctx, spec)
	if err != nil {
		return k.failed(spec, err.Error())
	}
	prov, err := json.Marshal(r.Provenance)
	if err != nil {
		return k.failed(spec, err.Error())
	}
	cmd := append(append([]string{image.BinaryPath, "load"}, spec.LoadArgs(r.Label, "-")...), "-provenance", string(prov))
	cmd = append(cmd, target...)
	jsonPath := filepath.Join(k.cfg.OutDir, lab.JSONName(spec, r.Label))
	sampler := k.newSampler()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.run(sctx, spec.Warmup, spec.Duration) }()
	err = k.exec(ctx, spec, cmd, jsonPath)
	stopSampling()
	<-sampled
	if err != nil {
		return k.failed(spec, err.Error())
	}
	got, err := results.ReadFortioFile(jsonPath)
	if err != nil {
		return k.failed(spec, err.Error())
	}
	r = lab.MergeLoad(r, got)
	r.Processes = sampler.processes(ctx)
	after, err := k.scrape(ctx)
	if err != nil {
		r.Failed, r.FailureReason = true, err.Error()
		return lab.Outcome{Run: r}
	}
	var checks []lab.Check
	if k.sidecarErr != "" {
		checks = append(checks, lab.Check{Name: "sidecars as " + string(spec.Mode) + " wants", Detail: k.sidecarErr})
	}
	checks = append(checks, lab.TrafficChecks(spec, r.Calls, before, after, Identities(k.render.Namespace))...)
	for _, c := range checks {
		if !c.OK && !r.Failed {
			r.Failed, r.FailureReason = true, "traffic check: "+c.Name+": "+c.Detail
		}
	}
	return lab.Outcome{Run: r, Checks: checks}
}

// target is where the load goes: the server Service's cluster IP and port,
// named by Host (gRPC's :authority) as a call to the Service by name, as
// the netns lab's; the IP keeps the cluster's DNS out of the measurement.
func (k *kubeLab) target(ctx context.Context, spec scenario.RunSpec) ([]string, error) {
	svc, err := k.c.Kube.CoreV1().Services(k.render.Namespace).Get(ctx, lab.ServerService, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("server Service: %w", err)
	}
	port := lab.ServiceHTTPPort
	switch spec.Protocol {
	case scenario.GRPC:
		port = lab.ServiceGRPCPort
	case scenario.TCP:
		port = lab.ServiceTCPPort
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(port))
	host := []string{"-H", "Host: " + ServerHost(k.render.Namespace)}
	switch spec.Protocol {
	case scenario.TCP:
		return []string{"tcp://" + addr}, nil
	case scenario.GRPC:
		return append(host, addr), nil
	}
	return append(host, "http://"+addr+spec.EchoPath()), nil
}

// exec runs cmd in the client pod's app container, its standard output
// (the load generator's Fortio JSON) into jsonPath. It uses WebSocket, as
// kubectl does, and SPDY when the API server does not upgrade to it.
func (k *kubeLab) exec(ctx context.Context, spec scenario.RunSpec, cmd []string, jsonPath string) error {
	ctx, cancel := context.WithTimeout(ctx, spec.Duration+spec.Timeout+time.Minute)
	defer cancel()
	req := k.c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.render.Namespace).Name(k.clientPod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Container: appContainer, Command: cmd, Stdout: true, Stderr: true},
		scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(k.c.REST, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in %s: %w", k.clientPod.Name, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(k.c.REST, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in %s: %w", k.clientPod.Name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in %s: %w", k.clientPod.Name, err)
	}
	f, err := os.Create(jsonPath)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	var stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: f, Stderr: &stderr})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return errors.New("interrupted")
		}
		msg := oneLine(stderr.String())
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		return fmt.Errorf("load generator in pod %s: %v: %s", k.clientPod.Name, err, msg)
	}
	return nil
}

// scrape reads each sidecar's metrics through the API server's pod proxy.
func (k *kubeLab) scrape(ctx context.Context) (lab.MetricsSnapshot, error) {
	var m lab.MetricsSnapshot
	pm := proxyMetrics[k.cfg.Mesh]
	var errs []error
	for _, s := range []struct {
		pod *corev1.Pod
		dst *string
	}{{k.clientPod, &m.Client}, {k.serverPod, &m.Server}} {
		if s.pod == nil || !inject.HasSidecar(s.pod) {
			continue
		}
		var err error
		*s.dst, err = k.c.podProxyGet(ctx, k.render.Namespace, s.pod.Name, pm.port, pm.path)
		errs = append(errs, err)
	}
	if k.mode.NodeProxies() {
		errs = append(errs, k.scrapeAmbient(ctx, &m))
	}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("proxy metrics: %w", err)
	}
	return m, nil
}

// The ambient data plane's node proxies, per mesh: where their pods are,
// their container, and where they serve their metrics.
var nodeProxies = map[Mesh]struct {
	namespace, selector, container string
	port                           int
	path                           string
}{
	MeshIstio:    {istioNamespace, "app=" + ztunnelName, "istio-proxy", 15020, "metrics"},
	MeshMeshperf: {inject.PilotNamespace, "app=" + inject.NodeName, inject.NodeProxyContainer, inject.NodeProxyStatsPort, "stats/prometheus"},
}

const waypointPodLabel = "gateway.networking.k8s.io/gateway-name"

// nodeProxyOn is the mesh's node proxy pod on node.
func (k *kubeLab) nodeProxyOn(ctx context.Context, node string) (*corev1.Pod, error) {
	np := nodeProxies[k.cfg.Mesh]
	pods, err := k.c.Kube.CoreV1().Pods(np.namespace).List(ctx, metav1.ListOptions{LabelSelector: np.selector})
	if err != nil {
		return nil, fmt.Errorf("node proxy pods (%s in %s): %w", np.selector, np.namespace, err)
	}
	for i, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil && podReady(&p) {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no node proxy (%s in %s) is ready on node %s", np.selector, np.namespace, node)
}

// scrapeAmbient reads, in the ambient modes, the node proxy on the client's
// node and on the server's, and the waypoint, for the netns lab's node
// proxy and waypoint checks.
func (k *kubeLab) scrapeAmbient(ctx context.Context, m *lab.MetricsSnapshot) error {
	np := nodeProxies[k.cfg.Mesh]
	var errs []error
	for _, side := range []struct {
		pod *corev1.Pod
		dst *string
	}{{k.clientNodeProxy, &m.ClientNode}, {k.serverNodeProxy, &m.ServerNode}} {
		var err error
		*side.dst, err = k.c.podProxyGet(ctx, np.namespace, side.pod.Name, np.port, np.path)
		errs = append(errs, err)
	}
	if k.waypointPod != nil {
		// The waypoint is the mesh's proxy, scraped as its sidecars are.
		pm := proxyMetrics[k.cfg.Mesh]
		var err error
		m.Waypoint, err = k.c.podProxyGet(ctx, k.render.Namespace, k.waypointPod.Name, pm.port, pm.path)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// roles are the containers a run measures, under the netns lab's roles.
func (k *kubeLab) roles() []containerRole {
	out := []containerRole{
		{results.RoleClientApp, k.clientPod, appContainer},
		{results.RoleServerApp, k.serverPod, appContainer},
	}
	if inject.HasSidecar(k.clientPod) {
		out = append(out, containerRole{results.RoleClientSidecar, k.clientPod, inject.ProxyContainerName})
	}
	if inject.HasSidecar(k.serverPod) {
		out = append(out, containerRole{results.RoleServerSidecar, k.serverPod, inject.ProxyContainerName})
	}
	// One node proxy serving both pods (a single node) is counted once, as
	// the client's: it is one proxy's CPU and memory.
	if c := nodeProxies[k.cfg.Mesh].container; k.clientNodeProxy != nil {
		out = append(out, containerRole{results.RoleClientNodeProxy, k.clientNodeProxy, c})
		if k.serverNodeProxy != nil && k.serverNodeProxy.UID != k.clientNodeProxy.UID {
			out = append(out, containerRole{results.RoleServerNodeProxy, k.serverNodeProxy, c})
		}
	}
	// The waypoint's proxy: istio-proxy in Istio's waypoint and in
	// meshperf's.
	if k.waypointPod != nil {
		out = append(out, containerRole{results.RoleWaypoint, k.waypointPod, inject.ProxyContainerName})
	}
	return out
}

// containerRole is a container and its role in a run's figures.
type containerRole struct {
	role      string
	pod       *corev1.Pod
	container string
}

func (c containerRole) String() string { return c.pod.Name + "/" + c.container }

// podProxyGet is GET path on port of pod ns/name through the API server's
// pod proxy: how the lab reaches a proxy's metrics wherever the pod runs.
func (c *Cluster) podProxyGet(ctx context.Context, ns, name string, port int, path string) (string, error) {
	b, err := c.podProxy.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name(name + ":" + strconv.Itoa(port)).
		SubResource("proxy").Suffix(path).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s:%d/%s: %w", ns, name, port, path, err)
	}
	return string(b), nil
}
