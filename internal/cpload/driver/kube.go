package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshperf/meshperf/internal/cpload/istiod"
	"github.com/meshperf/meshperf/internal/cpload/kubeload"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/kube/kwok"
)

// KubeOptions runs the test on a Kubernetes API server: the mesh's
// services and pods are real objects, its pods on kwok's fake nodes, and
// meshperf pilot reads them through --kubeconfig.
type KubeOptions struct {
	Kubeconfig string
	CIDR       string // kwok's pod range; kwok.DefaultCIDR if empty
	// Istiod is pilot-discovery's path: istiod instead of meshperf pilot
	// reads the API server (kubeistiod.go).
	Istiod string
}

// KubeFigures say how long the API objects took.
type KubeFigures struct {
	Nodes    int     `json:"nodes"`
	Pods     int     `json:"pods"`
	CreateMs float64 `json:"createMs"` // every object created
	ReadyMs  float64 `json:"readyMs"`  // every pod Running with its IP
}

// podsPerNode is how many pods each fake node takes, as a kubelet's
// default maximum (110) with headroom.
const podsPerNode = 100

// kubeRun is what a run on Kubernetes created, for stop to delete.
type kubeRun struct {
	client  kubernetes.Interface
	rest    *rest.Config
	kwok    *kwok.Kwok
	nodes   []string
	run     string
	dir     string // kwok's home and log, istiod's log
	timeout time.Duration
	// keepLogs keeps dir after a failed run, for kwok's and istiod's logs.
	keepLogs bool
}

// CheckKubeInput says what is wrong with the options themselves, before
// anything is asked of the API server: no kubeconfig, a bad pod range, more
// pods than it holds.
func CheckKubeInput(o *KubeOptions, pods int) error {
	if o.Kubeconfig == "" {
		return errors.New("--kube needs --kubeconfig (the API server's kubeconfig file)")
	}
	if _, err := os.Stat(o.Kubeconfig); err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, errors.Unwrap(err))
	}
	cidr := orDefault(o.CIDR, kwok.DefaultCIDR)
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil || !prefix.Addr().Is4() {
		return fmt.Errorf("--kwok-cidr %q: want an IPv4 prefix such as %s", cidr, kwok.DefaultCIDR)
	}
	if n := kwok.Capacity(prefix.Masked()); pods > n {
		return fmt.Errorf("%d pods do not fit kwok's pod range %s (%d addresses): fewer pods or a wider --kwok-cidr", pods, prefix.Masked(), n)
	}
	return nil
}

// checkKube refuses, before anything is created, what cannot work: no
// kubeconfig, an unreachable API server, a user that may not create what
// the run needs, kwok not built, more pods than kwok's range holds.
func checkKube(ctx context.Context, o *KubeOptions, pods int, access []authorizationv1.ResourceAttributes) (*rest.Config, kubernetes.Interface, dist.Bins, error) {
	if err := CheckKubeInput(o, pods); err != nil {
		return nil, nil, dist.Bins{}, err
	}
	bins, err := dist.Find()
	if err != nil {
		return nil, nil, bins, err
	}
	if _, err := kwok.Stages(bins); err != nil {
		return nil, nil, bins, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, nil, bins, fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = 200, 400 // creating a thousand pods at the default 5/s would take minutes
	rc.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, bins, fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
	}
	if _, err := c.Discovery().ServerVersion(); err != nil {
		return nil, nil, bins, fmt.Errorf("the API server at %s is unreachable: %v", rc.Host, err)
	}
	for _, r := range access {
		rv, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &r}}, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, bins, fmt.Errorf("asking the API server what --kubeconfig's user may do: %w", err)
		}
		if !rv.Status.Allowed {
			what := r.Resource
			if r.Group != "" {
				what += "." + r.Group
			}
			return nil, nil, bins, fmt.Errorf("RBAC: --kubeconfig's user may not %s %s, which --kube needs (cluster-admin does)", r.Verb, what)
		}
	}
	return rc, c, bins, nil
}

// kubeAccess is what the run does on the API server, for checkKube to ask
// before anything is created: the mesh's objects and kwok's nodes, the
// churn's kinds, and with istiod its namespace's leases and whether an
// istiod is installed there.
func (c *Config) kubeAccess() []authorizationv1.ResourceAttributes {
	out := []authorizationv1.ResourceAttributes{
		{Verb: "create", Resource: "namespaces"}, {Verb: "delete", Resource: "namespaces"},
		{Verb: "create", Resource: "nodes"}, {Verb: "delete", Resource: "nodes"}, {Verb: "create", Resource: "pods"},
		{Verb: "create", Resource: "services"}, {Verb: "create", Resource: "serviceaccounts"},
	}
	const net = "networking.istio.io"
	switch c.Churn {
	case ChurnEndpoints:
		out = append(out, authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods"})
	case ChurnConfig:
		out = append(out, authorizationv1.ResourceAttributes{Verb: "create", Group: net, Resource: "serviceentries"},
			authorizationv1.ResourceAttributes{Verb: "update", Group: net, Resource: "serviceentries"})
	case ChurnPerfTest:
		out = append(out, authorizationv1.ResourceAttributes{Verb: "create", Group: net, Resource: "gateways"},
			authorizationv1.ResourceAttributes{Verb: "create", Group: net, Resource: "virtualservices"})
	}
	if c.Kube.Istiod != "" {
		out = append(out, authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases"},
			authorizationv1.ResourceAttributes{Verb: "get", Group: "apps", Resource: "deployments", Namespace: istiod.Namespace})
	}
	return out
}

// startKube makes the mesh real on the API server: kwok, its nodes, the
// mesh's objects. It returns the mesh with its pods' IPs, and what to stop.
func startKube(ctx context.Context, c *Config) (*kubeRun, *shape.Mesh, *KubeFigures, error) {
	rc, client, bins, err := checkKube(ctx, c.Kube, len(c.Mesh.Proxies), c.kubeAccess())
	if err != nil {
		return nil, nil, nil, err
	}
	id := make([]byte, 3)
	if _, err := rand.Read(id); err != nil {
		return nil, nil, nil, err
	}
	// Sidecars on Kubernetes take their certificates from the CA, not SDS:
	// the pilot there serves no secrets, and istiod's come from istio-agent.
	c.NoSDS = true
	k := &kubeRun{client: client, rest: rc, run: hex.EncodeToString(id), timeout: c.timeout()}
	if k.dir, err = os.MkdirTemp("", "meshperf-cpload-kwok-"); err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*kubeRun, *shape.Mesh, *KubeFigures, error) {
		k.keepLogs = true
		k.stop()
		return nil, nil, nil, err
	}
	c.progress("starting kwok (run %s, pods in %s)", k.run, orDefault(c.Kube.CIDR, kwok.DefaultCIDR))
	k.kwok, err = kwok.Start(kwok.Options{Bins: bins, Kubeconfig: c.Kube.Kubeconfig, CIDR: c.Kube.CIDR, Run: k.run,
		LogPath: filepath.Join(k.dir, "kwok.log"), Home: k.dir})
	if err != nil {
		return fail(err)
	}
	nodeCount := (len(c.Mesh.Proxies) + podsPerNode - 1) / podsPerNode
	nodes, err := k.kwok.CreateNodes(ctx, client, nodeCount, podsPerNode+10, c.timeout())
	if err != nil {
		return fail(err)
	}
	c.progress("creating the mesh's objects: %d pods on %d kwok nodes", len(c.Mesh.Proxies), len(nodes))
	proxies, t, err := kubeload.Apply(ctx, client, c.Mesh, kubeload.Options{Run: k.run, Nodes: nodes, Timeout: c.timeout()})
	if err != nil {
		return fail(err)
	}
	k.nodes = nodes
	m := *c.Mesh
	m.Proxies = proxies
	return k, &m, &KubeFigures{Nodes: len(nodes), Pods: len(proxies), CreateMs: ms(t.Create), ReadyMs: ms(t.Ready)}, nil
}

// stop deletes what the run created and stops kwok: the namespaces first,
// while kwok still runs to finish their pods, then the nodes.
func (k *kubeRun) stop() {
	ctx := context.Background()
	if err := kubeload.Delete(ctx, k.client, k.run, k.timeout); err != nil {
		fmt.Fprintf(os.Stderr, "cpload: cleaning up: %v\n", err)
	}
	if k.kwok != nil {
		if err := k.kwok.DeleteNodes(ctx, k.client); err != nil {
			fmt.Fprintf(os.Stderr, "cpload: cleaning up: %v\n", err)
		}
		_ = k.kwok.Stop()
	}
	if k.keepLogs {
		fmt.Fprintf(os.Stderr, "cpload: the run failed; kwok's log (and istiod's, if it ran) kept in %s\n", k.dir)
		return
	}
	_ = os.RemoveAll(k.dir)
}

// applier is the run's churn through the API server (kubeapply.go), on
// the first kwok node.
func (k *kubeRun) applier() (*kubeApplier, error) {
	ic, err := istioclient.NewForConfig(k.rest)
	if err != nil {
		return nil, fmt.Errorf("the Istio client for %s: %w", k.rest.Host, err)
	}
	return newKubeApplier(k.client, ic, k.nodes[0]), nil
}
