// Package istiod runs Istio's control plane, pilot-discovery built by the
// user from istio/istio, for meshperf to measure beside its own pilot: in
// its file mode for `meshperf bench pilot`, against a Kubernetes API server
// for `meshperf cpload run --kube -istiod`. It is the one way meshperf
// starts istiod: free loopback ports for its listeners (it cannot report
// the ports it bound), no TLS listeners, no CA (the simulated proxies ask
// for no secrets, as istiod's sidecars get theirs from istio-agent), and a
// wait until it serves xDS and its metrics.
package istiod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/proc"
)

// StartTimeout bounds istiod's start-up: it reads its config (a directory,
// or the API server's lists) and builds its first push context before it
// serves.
const StartTimeout = time.Minute

// Namespace is where istiod believes it runs (POD_NAMESPACE): Istio's
// system namespace, where it keeps its leader-election leases.
const Namespace = "istio-system"

// baseEnv is istiod's environment whatever its source: its namespace, no
// CA of its own (nothing asks it for certificates) and no distribution
// tracking (status writes back to the config's objects, a cost the
// measured mesh would not choose).
var baseEnv = []string{
	"POD_NAMESPACE=" + Namespace,
	"ENABLE_CA_SERVER=false",
	"PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=false",
}

// Options says how to run istiod.
type Options struct {
	// Path is pilot-discovery's executable.
	Path string
	// Source are the flags that give istiod its config and registry:
	// FileMode's or KubeMode's.
	Source []string
	// Env is added to this process's environment and baseEnv: the knobs
	// (PILOT_DEBOUNCE_AFTER, ...) and the pod identity on Kubernetes.
	Env []string
	// Dir is its working directory; its log is Dir/istiod.log.
	Dir string
}

// FileMode are the flags of istiod's file mode: no registry, config from
// the YAML files in configDir, the mesh config from meshConfig (Istio's
// defaults when the file is absent).
func FileMode(configDir, meshConfig string) []string {
	return []string{"--registries=", "--configDir", configDir, "--meshConfig", meshConfig}
}

// KubeMode are the flags that make istiod read the API server of
// kubeconfig, as in a cluster (its Kubernetes registry and Istio's CRDs).
func KubeMode(kubeconfig string) []string {
	return []string{"--kubeconfig", kubeconfig}
}

// Istiod is a running istiod.
type Istiod struct {
	p *proc.Process
	// XDS is its plaintext gRPC address (the proxies' ADS).
	XDS string
	// MetricsURL is its /metrics, on the monitoring port.
	MetricsURL string
}

// Start runs istiod and returns once it serves xDS and its metrics.
func Start(ctx context.Context, o Options) (*Istiod, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	grpcAddr, httpAddr, monitoringAddr := loopback(ports[0]), loopback(ports[1]), loopback(ports[2])
	args := append([]string{"discovery"}, o.Source...)
	args = append(args, "--grpcAddr", grpcAddr, "--httpAddr", httpAddr, "--monitoringAddr", monitoringAddr,
		"--secureGRPCAddr", "", "--httpsAddr", "", "--log_output_level", "default:warn")
	env := append(append(os.Environ(), baseEnv...), o.Env...)
	p, err := proc.Start(proc.Spec{Name: "istiod", Path: o.Path, Args: args, Env: env, Dir: o.Dir,
		LogPath: filepath.Join(o.Dir, "istiod.log")})
	if err != nil {
		return nil, err
	}
	i := &Istiod{p: p, XDS: grpcAddr, MetricsURL: "http://" + monitoringAddr + "/metrics"}
	if err := i.wait(ctx, ports[0]); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return i, nil
}

// PID is istiod's process, for its CPU and memory.
func (i *Istiod) PID() int { return i.p.PID() }

// LogPath is istiod's log file.
func (i *Istiod) LogPath() string { return i.p.LogPath() }

// Exited says whether istiod has ended; ExitReason then says how.
func (i *Istiod) Exited() bool { return i.p.Exited() }

// ExitReason waits for istiod's end and says how it ended.
func (i *Istiod) ExitReason() string { return i.p.ExitReason() }

// Stop stops istiod (SIGTERM, then SIGKILL).
func (i *Istiod) Stop() error { return i.p.Stop() }

// wait returns once istiod listens for xDS and answers /metrics.
func (i *Istiod) wait(ctx context.Context, grpcPort int) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	for {
		addrs, _ := proc.ListeningAddrs(i.p.PID())
		listening := slices.ContainsFunc(addrs, func(a netip.AddrPort) bool { return int(a.Port()) == grpcPort })
		if listening {
			if _, err := metrics.Scrape(ctx, nil, i.MetricsURL); err == nil {
				return nil
			}
		}
		select {
		case <-i.p.Done():
			return fmt.Errorf("%s (its log: %s)", i.p.ExitReason(), i.p.LogPath())
		case <-ctx.Done():
			return fmt.Errorf("istiod did not serve xDS on %d and its metrics within %v (its log: %s)", grpcPort, StartTimeout, i.p.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Version is what `pilot-discovery version -s` says of the build at path
// ("1.28.0"; "unknown" for a build without Istio's version stamp).
func Version(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version", "-s").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s version -s: %v: %s", path, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s version -s: %w", path, err)
	}
	v := strings.TrimSpace(string(out))
	// pilot-discovery prints "client version: V"; older builds print V alone.
	if _, after, ok := strings.Cut(v, "version:"); ok {
		v = strings.TrimSpace(after)
	}
	if v == "" {
		return "", fmt.Errorf("%s version -s printed nothing", path)
	}
	return v, nil
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding free ports for istiod: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
