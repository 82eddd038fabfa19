// Package cluster runs a real single-node Kubernetes cluster on this
// machine, for tests and CI: etcd, the API server, controller manager and
// scheduler, containerd with runc and the CNI bridge, the kubelet,
// kube-proxy and CoreDNS, as host processes that outlive `meshperf cluster
// up` and stop at `meshperf cluster down`.
//
// Everything it uses is its own: a state directory holding the PKI, the
// configuration files, containerd's root and socket, the logs and the state
// file (what runs, what the host looked like before); addresses only in the
// RFC 2544 benchmarking range 198.18.0.0/15, blackholed as a whole so that
// nothing is routed off the machine. Up records the host's state before it
// changes anything (host.go); Down restores it, from the state file alone,
// so it also cleans up after a crash, and then says what, if anything, is
// not as it was.
package cluster

import (
	"path/filepath"
)

// The cluster's addresses and names.
const (
	NodeName      = "meshperf-node"
	NodeIP        = "198.18.0.1" // on lo, /32: the kernel here has no dummy driver
	Range         = "198.18.0.0/15"
	PodCIDR       = "198.18.1.0/24"
	PodGateway    = "198.18.1.1"
	ServiceCIDR   = "198.18.128.0/20"
	APIServiceIP  = "198.18.128.1" // the kubernetes Service: the range's first address
	DNSServiceIP  = "198.18.128.10"
	ClusterDomain = "cluster.local"
	// Bridge is the pods' bridge; at most 15 bytes, as every link name.
	Bridge = "meshperf-cni0"
)

// The components' ports, on the node IP unless said.
const (
	etcdClientPort     = 2379 // on 127.0.0.1: only the API server talks to etcd
	etcdPeerPort       = 2380 // on 127.0.0.1
	apiserverPort      = 6443
	controllerMgrPort  = 10257
	schedulerPort      = 10259
	kubeletPort        = 10250
	kubeletHealthzPort = 10248
	kubeProxyHealthz   = 10256
	kubeProxyMetrics   = 10249
	coreDNSReadyPort   = 8181
)

// DefaultStateDir is where the cluster keeps its files unless told.
const DefaultStateDir = "/var/lib/meshperf/cluster"

// layout names the files in a state directory.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}

func (l layout) stateFile() string             { return l.path("state.json") }
func (l layout) pki(name string) string        { return l.path("pki", name) }
func (l layout) kubeconfig(name string) string { return l.path("kubeconfig", name) }
func (l layout) log(name string) string        { return l.path("logs", name+".log") }
func (l layout) config(name string) string     { return l.path("config", name) }
func (l layout) etcdData() string              { return l.path("etcd") }
func (l layout) containerdDir() string         { return l.path("containerd") }
func (l layout) containerdSocket() string      { return l.path("containerd", "containerd.sock") }
func (l layout) cniConfDir() string            { return l.path("cni", "net.d") }
func (l layout) cniIPAMDir() string            { return l.path("cni", "ipam") }
func (l layout) kubeletRoot() string           { return l.path("kubelet") }
func (l layout) podLogs() string               { return l.path("pod-logs") }

// stateEntries are the names Up creates in a state directory: Down
// removes these and nothing else of it.
var stateEntries = []string{"state.json", "pki", "kubeconfig", "logs", "config", "etcd", "containerd", "cni",
	"kubelet", "kubelet-pki", "pod-logs", "images"}

// ContainerdSocket is the node's containerd socket in a state directory:
// where `meshperf image import` puts images for the cluster's pods.
func ContainerdSocket(stateDir string) string { return layout{stateDir}.containerdSocket() }

// AdminKubeconfig is the administrator's kubeconfig (system:masters) in a
// state directory.
func AdminKubeconfig(stateDir string) string { return layout{stateDir}.kubeconfig("admin") }
