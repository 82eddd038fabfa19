// Package kwok runs kwok (internal/kube/dist's pinned binary) as a host
// process that gives fake nodes and the pods bound to them a lifecycle
// through the API server alone: nodes become Ready, pods get an IP from the
// run's CIDR and become Running and Ready, so that the controller manager
// makes EndpointSlices of them and a control plane's informers see a mesh of
// any size without a kubelet or a container.
//
// Each run manages only the nodes carrying its own annotation value
// (--manage-nodes-with-annotation-selector), so that two runs, or the local
// cluster's real node, never see each other's nodes.
package kwok

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/proc"
)

// DefaultCIDR is the fake pods' range: inside the RFC 2544 range the
// project keeps cluster addresses in, outside the local cluster's pods
// (198.18.1.0/24) and Services (198.18.128.0/20).
const DefaultCIDR = "198.18.64.0/18"

// NodeAnnotation marks a fake node with the run that manages it.
const NodeAnnotation = "meshperf.io/kwok-run"

// Taint keeps real pods off the fake nodes; the pods meant for them
// tolerate it (Toleration).
var Taint = corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// Toleration lets a pod run on a fake node.
var Toleration = corev1.Toleration{Key: Taint.Key, Operator: corev1.TolerationOpEqual, Value: Taint.Value, Effect: Taint.Effect}

// Stages returns kwok's stage files in b's cache, where `meshperf cluster
// build` copies them (dist.KwokStageFiles says which and why), or an error
// matching dist.ErrNotBuilt saying to run it.
func Stages(b dist.Bins) ([]string, error) { return b.KwokStages() }

// Options says how to run kwok.
type Options struct {
	Bins       dist.Bins
	Kubeconfig string // the API server kwok manages nodes and pods through
	CIDR       string // pods' IPs; DefaultCIDR if empty
	Run        string // this run's identity, the NodeAnnotation value
	LogPath    string // kwok's output; empty keeps its tail in memory
	// Home is a directory of this run's own, kwok's HOME: kwok reads
	// $HOME/.kwok/kwok.yaml whatever its flags say, and a shared
	// directory (/tmp) would let anyone plant one for a root process.
	Home string
}

// Kwok is a running kwok.
type Kwok struct {
	p    *proc.Process
	run  string
	cidr netip.Prefix
}

// Start starts kwok. It stops with Stop, and with the calling process if
// that dies.
func Start(o Options) (*Kwok, error) {
	if o.CIDR == "" {
		o.CIDR = DefaultCIDR
	}
	prefix, err := netip.ParsePrefix(o.CIDR)
	if err != nil || !prefix.Addr().Is4() {
		return nil, fmt.Errorf("kwok pod CIDR %q: want an IPv4 prefix such as %s", o.CIDR, DefaultCIDR)
	}
	if o.Run == "" {
		return nil, errors.New("kwok: a run identity is needed")
	}
	if o.Home == "" {
		return nil, errors.New("kwok: a home directory of the run's own is needed")
	}
	bin := o.Bins.Path(dist.Kwok)
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("%w: no %s: run `meshperf cluster build`", dist.ErrNotBuilt, bin)
	}
	stages, err := Stages(o.Bins)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", o.Kubeconfig, "--cidr", prefix.String(),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", NodeAnnotation + "=" + o.Run}
	for _, s := range stages {
		args = append(args, "--config", s)
	}
	p, err := proc.Start(proc.Spec{Name: "kwok", Path: bin, Args: args, LogPath: o.LogPath,
		Env:               append(os.Environ(), "HOME="+o.Home),
		ParentDeathSignal: syscall.SIGKILL})
	if err != nil {
		return nil, err
	}
	return &Kwok{p: p, run: o.Run, cidr: prefix}, nil
}

// Stop stops kwok.
func (k *Kwok) Stop() error { return k.p.Stop() }

// CIDR is the pods' range.
func (k *Kwok) CIDR() netip.Prefix { return k.cidr }

// Capacity is how many pod IPs the CIDR holds (network and broadcast
// addresses excluded).
func Capacity(p netip.Prefix) int {
	bits := 32 - p.Bits()
	if bits >= 31 {
		return 1 << 30
	}
	return 1<<bits - 2
}

// NodeName is the name of the run's i-th fake node.
func (k *Kwok) NodeName(i int) string { return "meshperf-kwok-" + k.run + "-" + strconv.Itoa(i) }

// CreateNodes creates n fake nodes of the run, each for up to maxPods pods,
// and waits until kwok has made them Ready: that is also the proof kwok
// runs and reaches the API server.
func (k *Kwok) CreateNodes(ctx context.Context, c kubernetes.Interface, n, maxPods int, timeout time.Duration) ([]string, error) {
	pods := strconv.Itoa(maxPods)
	var names []string
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: k.NodeName(i),
				Annotations: map[string]string{NodeAnnotation: k.run, "kwok.x-k8s.io/node": "fake"},
				Labels:      map[string]string{"type": "kwok", NodeAnnotation: k.run}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{Taint}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)},
				Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}},
		}
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return names, fmt.Errorf("creating fake node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
	}
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		for {
			node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && nodeReady(node) {
				break
			}
			if k.p.Exited() {
				return names, fmt.Errorf("kwok %s", k.p.ExitReason())
			}
			if time.Now().After(deadline) {
				return names, fmt.Errorf("fake node %s not Ready after %s: is kwok managing it? kwok: %s", name, timeout, k.p.LastLine())
			}
			select {
			case <-ctx.Done():
				return names, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return names, nil
}

// DeleteNodes deletes the run's fake nodes.
func (k *Kwok) DeleteNodes(ctx context.Context, c kubernetes.Interface) error {
	return DeleteNodes(ctx, c, k.run)
}

// DeleteNodes deletes the fake nodes of run.
func DeleteNodes(ctx context.Context, c kubernetes.Interface, run string) error {
	err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: NodeAnnotation + "=" + run})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting fake nodes: %w", err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
