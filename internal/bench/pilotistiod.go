package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/proc"
)

// istiodStartTimeout bounds istiod's start-up: it reads the config
// directory and builds its first push context before it serves.
const istiodStartTimeout = time.Minute

// istiodEnv is istiod's environment besides the debounce: no Kubernetes
// (file mode), no CA of its own to keep in a cluster's secrets, and the
// proxies' certificates left to istio-agent (the simulated proxies ask for
// no secrets).
var istiodEnv = []string{
	"POD_NAMESPACE=istio-system",
	"ENABLE_CA_SERVER=false",
	"PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=false",
}

// startIstiod runs pilot-discovery in its file mode, as docs/cpload.md
// says: discovery --registries= --configDir DIR, its listeners on free
// loopback ports (it cannot report the ports it bound, so they are picked
// free beforehand), with the debounce settings ours gets.
func startIstiod(ctx context.Context, c *PilotConfig, configDir, dataDir string) (*controlPlane, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	grpcAddr, httpAddr, monitoringAddr := loopback(ports[0]), loopback(ports[1]), loopback(ports[2])
	args := []string{"discovery", "--registries=", "--configDir", configDir,
		"--grpcAddr", grpcAddr, "--httpAddr", httpAddr, "--monitoringAddr", monitoringAddr,
		"--secureGRPCAddr", "", "--httpsAddr", "", "--meshConfig", filepath.Join(dataDir, "mesh.yaml"),
		"--log_output_level", "default:warn"}
	env := append(append(os.Environ(), istiodEnv...), debounceEnv(c)...)
	p, err := proc.Start(proc.Spec{Name: "istiod", Path: c.Istiod, Args: args, Env: env, Dir: dataDir,
		LogPath: filepath.Join(dataDir, "istiod.log")})
	if err != nil {
		return nil, err
	}
	metricsURL := "http://" + monitoringAddr + "/metrics"
	if err := waitIstiod(ctx, p, ports[0], metricsURL); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return &controlPlane{xds: grpcAddr, metricsURL: metricsURL, pid: p.PID(), stop: p.Stop}, nil
}

// waitIstiod returns once istiod listens for xDS and answers /metrics.
func waitIstiod(ctx context.Context, p *proc.Process, grpcPort int, metricsURL string) error {
	ctx, cancel := context.WithTimeout(ctx, istiodStartTimeout)
	defer cancel()
	for {
		addrs, _ := proc.ListeningAddrs(p.PID())
		listening := slices.ContainsFunc(addrs, func(a netip.AddrPort) bool { return int(a.Port()) == grpcPort })
		if listening {
			if _, err := metrics.Scrape(ctx, nil, metricsURL); err == nil {
				return nil
			}
		}
		select {
		case <-p.Done():
			return errors.New(p.ExitReason())
		case <-ctx.Done():
			return fmt.Errorf("istiod did not serve xDS on %d and its metrics within %v (its log: %s)", grpcPort, istiodStartTimeout, p.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
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
