package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// pilotFlags are meshperf pilot's flags, with istiod's names where istiod has
// them, so that scripts written for one drive the other.
type pilotFlags struct {
	configDir      string
	meshConfig     string
	grpcAddr       string
	secureGRPCAddr string
	httpAddr       string
	monitoringAddr string
	dataDir        string
	domain         string
	logLevel       string
	push           push.Options
	sendTimeout    time.Duration
}

func (f *pilotFlags) define(fs *flag.FlagSet, env push.Options, envSendTimeout time.Duration) {
	fs.StringVar(&f.configDir, "configDir", "", "read config from this directory of YAML files, watched for changes, instead of the embedded store (istiod's file mode)")
	fs.StringVar(&f.configDir, "config-dir", "", "same as --configDir")
	fs.StringVar(&f.meshConfig, "meshConfig", "", "mesh config `file` (Istio's MeshConfig YAML); Istio's defaults when absent")
	addrVar(fs, &f.grpcAddr, "grpcAddr", "127.0.0.1:15010", hostPort, "plaintext xDS (ADS) `address`")
	addrVar(fs, &f.secureGRPCAddr, "secureGRPCAddr", "", optionalHostPort, "TLS xDS `address` (istiod's 15012 role), with a certificate from the built-in CA for istiod's names; off when empty")
	addrVar(fs, &f.httpAddr, "httpAddr", "127.0.0.1:8080", hostPort, "config API and debug endpoints `address`")
	addrVar(fs, &f.monitoringAddr, "monitoringAddr", "127.0.0.1:15014", hostPort, "/metrics `address`")
	fs.StringVar(&f.dataDir, "dataDir", defaultDataDir(), "`directory` of the embedded store and the CA's root")
	fs.StringVar(&f.domain, "domain", "cluster.local", "DNS domain suffix")
	fs.StringVar(&f.logLevel, "log_output_level", "info", "log `level`: debug, info, warn, error")
	// The knobs' defaults come from istiod's environment variables, so the
	// variables work as in istiod and a flag given explicitly wins.
	durationVar(fs, &f.push.DebounceAfter, "debounceAfter", env.DebounceAfter, "quiet period that closes a debounce window ("+push.EnvDebounceAfter+")")
	durationVar(fs, &f.push.DebounceMax, "debounceMax", env.DebounceMax, "longest a debounce window stays open ("+push.EnvDebounceMax+")")
	fs.BoolVar(&f.push.EnableEDSDebounce, "enableEDSDebounce", env.EnableEDSDebounce, "debounce endpoint-only changes too ("+push.EnvEnableEDSDebounce+")")
	countVar(fs, &f.push.PushThrottle, "pushThrottle", env.PushThrottle, "concurrent pushes; 0 = min(15+5*GOMAXPROCS, 100) ("+push.EnvPushThrottle+")")
	rateVar(fs, &f.push.MaxRequestsPerSecond, "maxRequestsPerSecond", env.MaxRequestsPerSecond, "new xDS streams per second; 0 = automatic ("+push.EnvMaxRequestsPerSecond+")")
	durationVar(fs, &f.sendTimeout, "xdsSendTimeout", envSendTimeout, "bound on one xDS send; 0 = none ("+xds.EnvSendTimeout+")")
	f.push.MaxRequestsBurst = env.MaxRequestsBurst
}

func defaultDataDir() string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".meshperf", "pilot")
	}
	return ".meshperf-pilot"
}

// Pilot is `meshperf pilot`: the control plane.
func Pilot(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runPilot(ctx, args, stdout, stderr)
}

func runPilot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env, err := push.OptionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitBadInput
	}
	var sendTimeout time.Duration
	if v := os.Getenv(xds.EnvSendTimeout); v != "" {
		if sendTimeout, err = time.ParseDuration(v); err != nil || sendTimeout < 0 {
			fmt.Fprintf(stderr, "meshperf pilot: %s=%q: want a duration such as 5s\n", xds.EnvSendTimeout, v)
			return exitBadInput
		}
	}
	var f pilotFlags
	fs := flag.NewFlagSet("meshperf pilot", flag.ContinueOnError)
	f.define(fs, env, sendTimeout)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, "meshperf pilot [flags]", "The control plane: Istio config in, Envoy xDS out, through istiod's debounce/queue/throttle pipeline.")
			return exitOK
		}
		fmt.Fprintf(stderr, "meshperf pilot: %v (see meshperf pilot -h)\n", err)
		return exitBadInput
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: --log_output_level %q: want debug, info, warn or error\n", f.logLevel)
		return exitBadInput
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	mesh, err := config.LoadMeshConfig(f.meshConfig)
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitBadInput
	}
	// Bind every listener first: a bad or busy address must fail before the
	// store and the CA's root are created.
	listeners, err := bindAll(f.grpcAddr, f.httpAddr, f.monitoringAddr, f.secureGRPCAddr)
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	defer closeAll(listeners)
	srv, err := discovery.New(discovery.Options{
		StorePath: filepath.Join(f.dataDir, "config.db"), ConfigDir: f.configDir,
		CADir: filepath.Join(f.dataDir, "ca"), Mesh: mesh, DomainSuffix: f.domain,
		Push: f.push, XDS: xds.Options{SendTimeout: f.sendTimeout}, Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	defer srv.Close()
	return servePilot(ctx, srv, listeners, &f, log, stdout, stderr)
}

// bindAll listens on every non-empty address, or on none.
func bindAll(addrs ...string) ([]net.Listener, error) {
	out := make([]net.Listener, len(addrs))
	for i, addr := range addrs {
		if addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
		}
		out[i] = ln
	}
	return out, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

// servePilot serves on the bound listeners (xDS, API, metrics, and TLS xDS
// when bound) and runs the control plane until ctx ends.
func servePilot(ctx context.Context, srv *discovery.Server, listeners []net.Listener, f *pilotFlags, log *slog.Logger, stdout, stderr io.Writer) int {
	g := grpc.NewServer(srv.GRPCServerOptions()...)
	srv.RegisterGRPC(g)
	apiServer := &http.Server{Handler: api.NewHandler(apiDeps(srv, log)), ReadHeaderTimeout: 10 * time.Second}
	mon := http.NewServeMux()
	mon.Handle("/metrics", promhttp.HandlerFor(srv.Metrics(), promhttp.HandlerOpts{}))
	monServer := &http.Server{Handler: mon, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.Serve(listeners[0]) }()
	go func() { _ = apiServer.Serve(listeners[1]) }()
	go func() { _ = monServer.Serve(listeners[2]) }()
	fmt.Fprintf(stdout, "meshperf pilot: xDS on %s, API on http://%s, metrics on http://%s/metrics\n",
		listeners[0].Addr(), listeners[1].Addr(), listeners[2].Addr())
	secure := grpc.NewServer()
	if listeners[3] != nil {
		cfg, err := srv.ServingTLS()
		if err != nil {
			fmt.Fprintf(stderr, "meshperf pilot: TLS xDS: %v\n", err)
			return exitFailed
		}
		secure = grpc.NewServer(append(srv.GRPCServerOptions(), grpc.Creds(credentials.NewTLS(cfg)))...)
		srv.RegisterGRPC(secure)
		go func() { _ = secure.Serve(listeners[3]) }()
		fmt.Fprintf(stdout, "meshperf pilot: TLS xDS on %s (root certificate: %s)\n", listeners[3].Addr(), filepath.Join(f.dataDir, "ca", "root-cert.pem"))
	}
	err := srv.Run(ctx)
	g.Stop()
	secure.Stop()
	_ = apiServer.Close()
	_ = monServer.Close()
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	return exitOK
}
