// Package nodeagent is meshperf's node agent on a Kubernetes node, the role
// of istio-cni's agent in ambient mode: it watches the pods on its node and
// their namespaces, and for each pod enrolled in ambient finds the pod's
// network namespace, installs the in-pod redirection there (the lab's
// pod.InpodRules, route and rule) and hands the namespace to the node proxy
// over ZDS (inpod.Server). A pod that goes, or leaves ambient, is taken back
// from the node proxy and its rules removed while its namespace lives.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meshperf/meshperf/internal/lab/inpod"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// Istio's enrolment label, on a pod or its namespace, and its values.
const (
	DataplaneModeLabel = "istio.io/dataplane-mode"
	DataplaneAmbient   = "ambient"
	DataplaneNone      = "none" // on a pod: opted out whatever its namespace says
)

// DefaultResync is how often every pod is looked at again without an event:
// a pod whose namespace was not found yet (its sandbox still starting) or
// whose rules failed is retried then.
const DefaultResync = 5 * time.Second

// Config is what an Agent needs.
type Config struct {
	Client kubernetes.Interface
	Node   string // the node whose pods are served (spec.nodeName)
	// ProcRoot is the host's /proc, where pods' namespaces are found: the
	// agent runs with the host's PID namespace.
	ProcRoot string
	ZDS      *inpod.Server
	Log      *slog.Logger
	Resync   time.Duration // DefaultResync if zero
}

// enrolled is a pod the node proxy serves.
type enrolled struct {
	ip netip.Addr
	// podUID is the Pod object's uid: a pod recreated under the same name
	// (a StatefulSet's) is another sandbox, to be enrolled anew.
	podUID types.UID
	// ns holds the pod's network namespace from enrolment to release:
	// the rules go in, the node proxy is handed and the rules come out of
	// that namespace, whatever becomes of the process it was found through.
	ns *pod.Pod
}

// Agent serves one node's ambient pods.
type Agent struct {
	cfg        Config
	pods       cache.SharedIndexInformer
	namespaces cache.SharedIndexInformer
	wake       chan struct{}
	served     map[string]enrolled // by inpod.PodUID; only Run's goroutine touches it
}

// New makes the agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" {
		return nil, errors.New("node agent: no node name (NODE_NAME)")
	}
	if cfg.Client == nil || cfg.ZDS == nil {
		return nil, errors.New("node agent: a client and a ZDS server are required")
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Resync == 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	onNode := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.Node).String()
		}))
	all := informers.NewSharedInformerFactory(cfg.Client, 0)
	a := &Agent{
		cfg:        cfg,
		pods:       onNode.Core().V1().Pods().Informer(),
		namespaces: all.Core().V1().Namespaces().Informer(),
		wake:       make(chan struct{}, 1),
		served:     map[string]enrolled{},
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.poke() },
		UpdateFunc: func(any, any) { a.poke() },
		DeleteFunc: func(any) { a.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{a.pods, a.namespaces} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, fmt.Errorf("node agent: %w", err)
		}
	}
	return a, nil
}

func (a *Agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends, then takes every pod back from the node proxy
// and removes their rules (the node agent leaving the node, as istio-cni
// does not; but a pod left with the rules loses its traffic once the node
// proxy goes too, as when the DaemonSet is deleted). synced, if not nil, is
// called once the first pass over the listed pods is done.
func (a *Agent) Run(ctx context.Context, synced func()) error {
	go a.pods.Run(ctx.Done())
	go a.namespaces.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.pods.HasSynced, a.namespaces.HasSynced) {
		return fmt.Errorf("node agent: pods and namespaces not listed: %w", ctx.Err())
	}
	a.cfg.Log.Info("watching", "node", a.cfg.Node)
	a.reconcile()
	if synced != nil {
		synced()
	}
	tick := time.NewTicker(a.cfg.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			a.releaseAll()
			return nil
		case <-a.wake:
		case <-tick.C:
		}
		a.reconcile()
	}
}

// Enrolled reports whether p is to be served by the node proxy, by Istio's
// rules: the pod's or else its namespace's dataplane-mode label says
// ambient, it has no sidecar, it is not on the host's network and it has
// an address. A terminating pod stays served until it is gone, as Istio
// keeps it, so that its connections finish through the node proxy and its
// last requests are not sent in plain text.
func Enrolled(p *corev1.Pod, ns *corev1.Namespace) bool {
	mode := p.Labels[DataplaneModeLabel]
	if mode == "" && ns != nil {
		mode = ns.Labels[DataplaneModeLabel]
	}
	if mode != DataplaneAmbient || p.Spec.HostNetwork || p.Status.PodIP == "" {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return !inject.HasSidecar(p)
}

// reconcile brings the served set to what the informers say.
func (a *Agent) reconcile() {
	want := map[string]*corev1.Pod{}
	for _, obj := range a.pods.GetStore().List() {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName != a.cfg.Node {
			continue
		}
		var ns *corev1.Namespace
		if obj, ok, _ := a.namespaces.GetStore().GetByKey(p.Namespace); ok {
			ns, _ = obj.(*corev1.Namespace)
		}
		if Enrolled(p, ns) {
			want[inpod.PodUID(p.Namespace, p.Name)] = p
		}
	}
	for _, uid := range sortedKeys(a.served) {
		if p, ok := want[uid]; ok && p.Status.PodIP == a.served[uid].ip.String() && p.UID == a.served[uid].podUID {
			continue
		}
		a.release(uid)
	}
	for _, uid := range sortedKeys(want) {
		if _, ok := a.served[uid]; !ok {
			a.enrol(uid, want[uid])
		}
	}
}

// enrol installs the rules in the pod's namespace and hands it to the node
// proxy. A failure is logged and retried at the next resync: a pod's
// sandbox may not be found yet, and one pod must not stop the others.
func (a *Agent) enrol(uid string, p *corev1.Pod) {
	log := a.cfg.Log.With("pod", p.Namespace+"/"+p.Name, "ip", p.Status.PodIP)
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil {
		log.Warn("pod address", "err", err)
		return
	}
	path, _, err := pod.FindNetns(a.cfg.ProcRoot, ip)
	if err != nil {
		log.Info("network namespace not found yet", "err", err)
		return
	}
	ns, err := pod.Adopt(p.Name, ip, path)
	if err != nil {
		log.Info("network namespace gone", "err", err)
		return
	}
	if err := ns.CaptureInpod(); err != nil {
		log.Warn("in-pod rules", "err", err)
		ns.Release()
		return
	}
	w := inpod.Workload{UID: uid, Name: p.Name, Namespace: p.Namespace, ServiceAccount: inject.ServiceAccount(p), NetnsPath: ns.NetnsPath()}
	if err := a.cfg.ZDS.Add(w); err != nil {
		// Back to the app's own path: a pod the node proxy does not serve
		// must not have its traffic sent to listeners that are not there.
		log.Warn("node proxy refused the pod", "err", err)
		if err := ns.Uncapture(); err != nil {
			log.Warn("in-pod rules removal", "err", err)
		}
		ns.Release()
		return
	}
	a.served[uid] = enrolled{ip: ip, podUID: p.UID, ns: ns}
	log.Info("enrolled", "netns", path)
}

// release takes the pod back from the node proxy, removes its rules and
// lets its namespace go.
func (a *Agent) release(uid string) {
	e := a.served[uid]
	log := a.cfg.Log.With("uid", uid)
	if err := a.cfg.ZDS.Del(uid); err != nil {
		log.Warn("node proxy delete", "err", err)
	}
	delete(a.served, uid)
	if err := e.ns.Uncapture(); err != nil {
		log.Warn("in-pod rules removal", "err", err)
	}
	e.ns.Release()
	log.Info("released")
}

func (a *Agent) releaseAll() {
	for _, uid := range sortedKeys(a.served) {
		a.release(uid)
	}
}

// sortedKeys makes the agent's work in an order logs can be read in.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
