// Package dist is the Kubernetes meshperf runs on this machine: the versions
// it pins, where their binaries are cached (outside the repository, keyed by
// version, never committed), finding them, and building them from the Go
// module proxy (build.go).
//
// Why build rather than download: the only sources a machine like CI's can
// reach are Debian's archive and the Go module proxy, and Debian has no
// current Kubernetes. The versions are the newest whose whole module set the
// proxy serves and that still run on cgroup v1 with Debian 12's containerd.
package dist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The pinned versions.
const (
	KubernetesVersion = "v1.33.13"
	CoreDNSVersion    = "v1.12.4"
	KwokVersion       = "v0.8.0"
)

// DirEnv names a directory that overrides where the binaries are cached.
const DirEnv = "MESHPERF_KUBE_DIR"

// The binaries a cluster needs, by file name.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kubelet           = "kubelet"
	KubeProxy         = "kube-proxy"
	Kubectl           = "kubectl"
	CoreDNS           = "coredns"
	Kwok              = "kwok"
)

// Names lists every binary Find expects.
var Names = []string{APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy, Kubectl, CoreDNS, Kwok}

// Bins is a directory holding every binary in Names.
type Bins struct {
	Dir string
}

// Path is the path of the named binary.
func (b Bins) Path(name string) string { return filepath.Join(b.Dir, name) }

// Dir is the cache directory for the pinned versions: $MESHPERF_KUBE_DIR,
// else /var/cache/meshperf/kubernetes-VERSION as root, else the user's
// cache directory (~/.cache/meshperf/kubernetes-VERSION).
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	leaf := "kubernetes-" + KubernetesVersion
	if os.Geteuid() == 0 {
		return filepath.Join("/var/cache/meshperf", leaf)
	}
	if c, err := os.UserCacheDir(); err == nil {
		return filepath.Join(c, "meshperf", leaf)
	}
	return filepath.Join(os.TempDir(), "meshperf-"+leaf)
}

// ErrNotBuilt is matched by Find's error when a binary is missing.
var ErrNotBuilt = errors.New("kubernetes binaries not built")

// Find returns the cached binaries, or an error matching ErrNotBuilt that
// names the first missing one and the command that builds them.
func Find() (Bins, error) {
	b := Bins{Dir: Dir()}
	for _, name := range Names {
		st, err := os.Stat(b.Path(name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return b, fmt.Errorf("%w: %s has no %s (Kubernetes %s, CoreDNS %s, kwok %s): run `meshperf cluster build`",
				ErrNotBuilt, b.Dir, name, KubernetesVersion, CoreDNSVersion, KwokVersion)
		}
	}
	return b, nil
}
