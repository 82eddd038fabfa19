package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/httpguard"
	"github.com/meshperf/meshperf/internal/pilot/api"
)

// PilotAddrs are the addresses of `meshperf pilot`'s listeners.
type PilotAddrs struct {
	GRPC       string // plaintext ADS (--grpcAddr; "grpc" in its ready file)
	HTTP       string // config API and debug endpoints (--httpAddr; "http")
	Monitoring string // /metrics (--monitoringAddr; "monitoring")
	// SecureGRPC is TLS ADS and the CA (--secureGRPCAddr; "secureGRPC"),
	// where node proxies connect; empty when off.
	SecureGRPC string
}

// PilotOptions start `meshperf pilot` as a child process, as the lab and the
// control-plane load test do.
type PilotOptions struct {
	// Command runs meshperf pilot, e.g. {"/usr/local/bin/meshperf", "pilot"};
	// the listener, data directory, log level and ready file flags are
	// appended to it.
	Command []string
	// Host is the IP the listeners bind (port 0) unless Addrs names them;
	// the zero value means 127.0.0.1.
	Host netip.Addr
	// Addrs fixes listeners' addresses; an empty one binds Host port 0.
	Addrs PilotAddrs
	// Secure turns on the TLS listener (istiod's 15012 role: ADS and the CA
	// for node proxies), at Addrs.SecureGRPC or Host port 0.
	Secure bool
	// DataDir holds the store, the CA's root and the ready file.
	DataDir string
	// MeshConfig is a mesh config file (--meshConfig); none if empty.
	MeshConfig string
	// LogLevel is --log_output_level; pilot's default if empty.
	LogLevel string
	// Env are KEY=VALUE pairs added to this process's environment (the
	// PILOT_* knobs).
	Env []string
	// LogPath receives its output; empty keeps the tail in memory.
	LogPath string
	// Name is what messages call it; "control plane" if empty.
	Name string
	// APIToken is the token its API requires on writes and /debug/,
	// passed in its environment (api.TokenEnv): a flag would show in
	// /proc/PID/cmdline and pprof's cmdline. Empty, StartPilot makes one
	// up when the API is not on loopback, where other hosts reach it.
	APIToken string
	// InsecureTrustClaimedIdentity passes --insecure-trust-claimed-identity:
	// SDS serves the identity each proxy claims, and the CA signs for any
	// caller, for a fleet of proxies simulated from one process. Pilot
	// refuses it unless every listener is on loopback. A build from before
	// the flag trusted claims anyway, and is started without it.
	InsecureTrustClaimedIdentity bool
}

// Pilot is a running `meshperf pilot`.
type Pilot struct {
	*Process
	// Addrs are where it listens, as its ready file says.
	Addrs PilotAddrs
	opts  PilotOptions
}

// StartPilot starts meshperf pilot and returns once it has written its
// ready file (every listener bound), or fails with its exit reason, or when
// ctx ends or timeout passes.
func StartPilot(ctx context.Context, o PilotOptions, timeout time.Duration) (*Pilot, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("start meshperf pilot: no command")
	}
	if o.Name == "" {
		o.Name = "control plane"
	}
	if !o.Host.IsValid() {
		o.Host = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: data directory: %w", o.Name, err)
	}
	orPort0 := func(addr string) string {
		if addr != "" {
			return addr
		}
		return netip.AddrPortFrom(o.Host, 0).String()
	}
	if o.APIToken == "" && !onLoopback(orPort0(o.Addrs.HTTP)) {
		token, err := httpguard.NewToken()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Name, err)
		}
		o.APIToken = token
	}
	args := append(append([]string(nil), o.Command[1:]...),
		"--grpcAddr", orPort0(o.Addrs.GRPC), "--httpAddr", orPort0(o.Addrs.HTTP),
		"--monitoringAddr", orPort0(o.Addrs.Monitoring), "--dataDir", o.DataDir)
	if o.Secure {
		args = append(args, "--secureGRPCAddr", orPort0(o.Addrs.SecureGRPC))
	}
	if o.MeshConfig != "" {
		args = append(args, "--meshConfig", o.MeshConfig)
	}
	if o.LogLevel != "" {
		args = append(args, "--log_output_level", o.LogLevel)
	}
	// The token is always set, empty too: one in this process's own
	// environment is not the child's.
	env := append(append(os.Environ(), o.Env...), api.TokenEnv+"="+o.APIToken)
	if o.InsecureTrustClaimedIdentity && knowsFlag(ctx, o.Command, env, insecureTrustFlag) {
		args = append(args, "--"+insecureTrustFlag)
	}
	readyFile := filepath.Join(o.DataDir, "pilot.ready")
	args = append(args, "--ready-file", readyFile)
	p, err := Start(Spec{Name: o.Name, Path: o.Command[0], Args: args, Env: env, LogPath: o.LogPath, ReadyFile: readyFile})
	if err != nil {
		return nil, err
	}
	r, err := p.WaitReady(ctx, timeout)
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	pl := &Pilot{Process: p, opts: o}
	type listener struct {
		name string
		dst  *string
	}
	listeners := []listener{{"grpc", &pl.Addrs.GRPC}, {"http", &pl.Addrs.HTTP}, {"monitoring", &pl.Addrs.Monitoring}}
	if o.Secure {
		listeners = append(listeners, listener{"secureGRPC", &pl.Addrs.SecureGRPC})
	}
	for _, l := range listeners {
		if *l.dst, err = r.Listener(l.name); err != nil {
			_ = p.Stop()
			return nil, err
		}
	}
	return pl, nil
}

// insecureTrustFlag is the flag behind PilotOptions.InsecureTrustClaimedIdentity.
const insecureTrustFlag = "insecure-trust-claimed-identity"

// knowsFlag says whether the meshperf pilot that command runs (in env,
// nil: this process's) lists flag in its -h: cpload and bench also drive
// older builds (-meshperf OLD), which would refuse a flag they do not have.
func knowsFlag(ctx context.Context, command, env []string, flag string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], append(append([]string(nil), command[1:]...), "-h")...)
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	return bytes.Contains(out, []byte("-"+flag))
}

// APIURL is the config API's base URL.
func (p *Pilot) APIURL() string { return "http://" + p.Addrs.HTTP }

// APIToken is the token its API requires ("" for none).
func (p *Pilot) APIToken() string { return p.opts.APIToken }

// APIClient is a client of its API that sends its token: how every caller
// that started a pilot talks to it.
func (p *Pilot) APIClient() (*api.Client, error) {
	return api.NewClient(p.APIURL(), nil, api.WithToken(p.opts.APIToken))
}

// onLoopback says whether a listen address (IP:port) is on loopback.
func onLoopback(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().IsLoopback()
}

// RootCertPath is the PEM file of the root of its CA, which signs its TLS
// listener's certificate and the workloads': a node proxy's XDS_ROOT_CA and
// CA_ROOT_CA.
func (p *Pilot) RootCertPath() string { return filepath.Join(p.opts.DataDir, "ca", "root-cert.pem") }

// DataDir holds its store, its CA and its ready file.
func (p *Pilot) DataDir() string { return p.opts.DataDir }

// MetricsURL is its Prometheus endpoint.
func (p *Pilot) MetricsURL() string { return "http://" + p.Addrs.Monitoring + "/metrics" }

// Restart stops p if it still runs (SIGTERM; use Kill first for a crash)
// and starts meshperf pilot again with the same options on the same
// addresses, so that its clients (sidecars, simulated proxies) reconnect
// where they were. The listeners set SO_REUSEADDR, as Go's do, so the
// connections the old process left in TIME_WAIT do not block the ports.
func (p *Pilot) Restart(ctx context.Context, timeout time.Duration) (*Pilot, error) {
	if err := p.Stop(); err != nil {
		return nil, err
	}
	o := p.opts
	o.Addrs = p.Addrs
	return StartPilot(ctx, o, timeout)
}
