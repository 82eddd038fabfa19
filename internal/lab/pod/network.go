// Package pod stands up "pods" on this machine the way Kubernetes does with an
// injected sidecar: each pod is a named network namespace with a veth on a
// shared bridge, its own address, processes started inside it (optionally as
// the proxy's uid 1337), and optionally Istio's iptables capture. Without root
// it falls back to one loopback address per pod, with the same Pod API, so the
// lab runner does not care which kind it holds; Network.Kind says which one was
// used so results can record it.
//
// Everything created is named "mp-<runid>-…" so that parallel runs do not
// collide and so that Clean can find what a crashed run left behind.
package pod

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
)

// Kind says how a Network isolates its pods.
type Kind string

const (
	// KindNetns pods are network namespaces on a Linux bridge (needs root).
	KindNetns Kind = "netns"
	// KindLoopback pods are distinct 127.0.0.0/8 addresses in the host
	// namespace: no isolation and no capture (Istio's captureMode NONE).
	KindLoopback Kind = "loopback"
	// KindKubernetes pods are a Kubernetes cluster's (meshperf lab run
	// --kube): no Network of this package makes them.
	KindKubernetes Kind = "kubernetes"
)

// Prefix starts the name of every namespace and link the lab creates.
const Prefix = "mp-"

// Network is a set of pods that can reach each other.
type Network interface {
	// Kind says whether pods are namespaces or loopback addresses.
	Kind() Kind
	// RunID is the id embedded in every name this network creates.
	RunID() string
	// NamePrefix is the prefix of every name this network creates; give it
	// to Clean to remove this network's leftovers.
	NamePrefix() string
	// Gateway is the host's address as pods see it: where pods reach
	// services running in the host namespace (the control plane).
	Gateway() netip.Addr
	// AddPod creates a pod with the next free address.
	AddPod(name string) (*Pod, error)
	// Pods lists the pods in the order they were added.
	Pods() []*Pod
	// Close stops every process, removes every pod and the network itself.
	// It keeps going past errors, returns them joined, and is idempotent.
	Close() error
}

// Options configures New.
type Options struct {
	// Kind selects the network kind; empty picks KindNetns when running as
	// root and KindLoopback otherwise.
	Kind Kind
	// RunID names everything this network creates; empty generates one.
	// 1 to 6 characters of [a-z0-9].
	RunID string
}

// New creates a network of the requested kind.
func New(opts Options) (Network, error) {
	kind := opts.Kind
	if kind == "" {
		kind = KindLoopback
		if os.Geteuid() == 0 {
			kind = KindNetns
		}
	}
	switch kind {
	case KindNetns:
		return NewBridgeNetwork(opts.RunID)
	case KindLoopback:
		return NewLoopbackNetwork(opts.RunID)
	default:
		return nil, fmt.Errorf("lab network kind %q: want %q or %q", kind, KindNetns, KindLoopback)
	}
}

var (
	runIDPattern   = regexp.MustCompile(`^[a-z0-9]{1,6}$`)
	podNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
)

// NewRunID returns a random 6-character run id.
func NewRunID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; a fixed id still works, it
		// only makes collisions between parallel runs possible.
		return "000000"
	}
	return hex.EncodeToString(b[:])
}

func checkRunID(id string) (string, error) {
	if id == "" {
		return NewRunID(), nil
	}
	if !runIDPattern.MatchString(id) {
		return "", fmt.Errorf("run id %q: want 1 to 6 characters of [a-z0-9] (names must fit Linux's 15-byte interface names)", id)
	}
	return id, nil
}

func checkPodName(name string) error {
	if !podNamePattern.MatchString(name) {
		return fmt.Errorf("pod name %q: want 1 to 32 characters of [a-z0-9-], starting and ending with a letter or digit", name)
	}
	return nil
}

// runPrefix is the prefix of every name one run creates.
func runPrefix(runID string) string { return Prefix + runID + "-" }

// ErrCaptureNeedsNetns is returned by Capture on a loopback pod.
var ErrCaptureNeedsNetns = errors.New("sidecar capture needs network namespaces (run as root); " +
	"loopback pods share the host's namespace, so proxies must use explicit listeners")
